//! Shared lexing of the kernel's `key=value` lines (`io.cost.model`, `io.cost.qos`).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::Error;

/// A block device number, the `MAJ:MIN` prefix of kernel lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct DevNum {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl fmt::Display for DevNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl FromStr for DevNum {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let (major, minor) = s.split_once(':').ok_or(())?;
        Ok(DevNum { major: major.parse().map_err(|_| ())?, minor: minor.parse().map_err(|_| ())? })
    }
}

/// Whether parameters were chosen by the kernel (`auto`) or set by the user (`user`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ctrl {
    /// Built-in parameters.
    #[default]
    Auto,
    /// User-provided parameters.
    User,
}

impl Ctrl {
    pub(crate) fn parse(format: &'static str, v: &str) -> Result<Self, Error> {
        match v {
            "auto" => Ok(Ctrl::Auto),
            "user" => Ok(Ctrl::User),
            _ => Err(parse_error(format, v, "ctrl must be 'auto' or 'user'")),
        }
    }
}

impl fmt::Display for Ctrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ctrl::Auto => "auto",
            Ctrl::User => "user",
        })
    }
}

/// One token of a kernel line.
pub(crate) enum Token<'a> {
    /// A leading `MAJ:MIN`.
    Dev(DevNum),
    /// `key=value`.
    Pair(&'a str, &'a str),
    /// A bare word.
    Word(&'a str),
}

/// Splits a line into tokens: an optional leading device number, then `key=value` pairs or words.
pub(crate) fn tokens(line: &str) -> impl Iterator<Item = Token<'_>> {
    line.split_whitespace().enumerate().map(|(i, tok)| {
        if let Some((k, v)) = tok.split_once('=') {
            Token::Pair(k, v)
        } else if let (0, Ok(dev)) = (i, tok.parse::<DevNum>()) {
            Token::Dev(dev)
        } else {
            Token::Word(tok)
        }
    })
}

/// A parse error for `format` about `input`.
pub(crate) fn parse_error(format: &'static str, input: &str, reason: &str) -> Error {
    Error::Parse { format, input: input.to_string(), reason: reason.to_string() }
}

/// Parses an unsigned integer value of `key`.
pub(crate) fn parse_u64(format: &'static str, key: &str, v: &str) -> Result<u64, Error> {
    v.parse().map_err(|_| parse_error(format, &format!("{key}={v}"), "expected a non-negative integer"))
}

/// Parses a decimal with at most two fraction digits into hundredths (`95.5` → 9550).
pub(crate) fn parse_centi(format: &'static str, key: &str, v: &str) -> Result<u64, Error> {
    let bad = || {
        parse_error(format, &format!("{key}={v}"), "expected a decimal with at most two fraction digits, like 95.00")
    };
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if int.is_empty() || frac.len() > 2 || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let int: u64 = int.parse().map_err(|_| bad())?;
    let frac: u64 = if frac.is_empty() { 0 } else { format!("{frac:0<2}").parse().map_err(|_| bad())? };
    int.checked_mul(100).and_then(|x| x.checked_add(frac)).ok_or_else(bad)
}

/// Formats hundredths as the kernel does (`9550` → `95.50`).
pub(crate) fn fmt_centi(centi: u64) -> String {
    format!("{}.{:02}", centi / 100, centi % 100)
}
