//! What the parsers' fuzz targets share: how many cases to run, and the inputs to run them on.
//!
//! Every parser of outside text (kernel files, the agent's configuration and state files) has a
//! proptest target in its crate. Each target states the same property: on any input the parser
//! returns — never panics — either a clear error (one line that names the format) or a correct value
//! (equal to what the input encodes; printing it and parsing again gives it back). Inputs come from
//! two kinds of strategy:
//! - unstructured: arbitrary bytes ([`lossy_text`]: what a reader decoding lossily sees) and
//!   arbitrary characters ([`text`]: control characters, NUL, newlines, any plane);
//! - structure-aware: a valid line or file from the target's own generator, then [`mutated`] — a
//!   token replaced by an edge value ([`EDGE_NUMBERS`], [`EDGE_WORDS`]), removed, repeated, text
//!   inserted, the text cut short.
//!
//! [`config`] runs [`DEFAULT_CASES`] cases per target (CI), or `IOSHARE_FUZZ_CASES` for a long run;
//! it persists no failure file: a crash found becomes a named regression test next to the target.

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

/// The environment variable that sets the number of cases per target.
pub const CASES_ENV: &str = "IOSHARE_FUZZ_CASES";
/// Cases per target when [`CASES_ENV`] is not set (every `cargo test`).
pub const DEFAULT_CASES: u32 = 256;

/// Numbers written at and beyond the edges of what parsers accept: zero, the integer limits and one
/// past them, negatives, signs, floats' specials and huge exponents, other radixes and digits.
pub const EDGE_NUMBERS: &[&str] = &[
    "0",
    "1",
    "-0",
    "-1",
    "+1",
    "00",
    "007",
    "255",
    "256",
    "4095",
    "10000",
    "10001",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999999999999",
    "0.0",
    "1.5",
    "95.00",
    "100.00",
    "100.01",
    "0.001",
    ".5",
    "5.",
    "1e3",
    "1e308",
    "1e309",
    "-1e309",
    "1e-400",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "infinity",
    "0x10",
    "1_000",
    "1,5",
    "١٢",
    "１２",
];

/// Words and characters that break naive splitting: empty, separators alone or doubled, NUL,
/// newlines, escapes, non-ASCII, the format's own keywords out of place.
pub const EDGE_WORDS: &[&str] = &[
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\0",
    "=",
    "==",
    ":",
    "::",
    ",",
    "/",
    "//",
    "*",
    "?",
    ".",
    "..",
    "-",
    "[",
    "]",
    "\"",
    "'",
    "\\",
    "\\040",
    "\\777",
    "#",
    "max",
    "default",
    "none",
    "Total",
    "some",
    "full",
    "\u{FFFD}",
    "é",
    "\u{1F600}",
    "\u{200B}",
    "\u{1b}[31m",
];

/// Cases per target: [`CASES_ENV`] if set to a number, else [`DEFAULT_CASES`].
pub fn cases() -> u32 {
    std::env::var(CASES_ENV).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_CASES)
}

/// The proptest configuration of every fuzz target: [`cases`] cases, no failure file.
pub fn config() -> Config {
    Config { cases: cases(), failure_persistence: None, ..Config::default() }
}

/// Arbitrary bytes, up to `max` of them.
pub fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..=max)
}

/// Arbitrary bytes as a reader that decodes lossily sees them (invalid UTF-8 becomes U+FFFD).
pub fn lossy_text(max: usize) -> impl Strategy<Value = String> {
    bytes(max).prop_map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Arbitrary characters, up to `max` of them: any plane, control characters, NUL and newlines.
pub fn text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(any::<char>(), 0..=max).prop_map(|c| c.into_iter().collect())
}

/// A number as text: an edge value, any integer or float as Rust prints it, or an integer with
/// digits appended until it overflows.
pub fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(EDGE_NUMBERS).prop_map(str::to_string),
        2 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<u32>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|n| n.to_string()),
        1 => (any::<u64>(), 1..30usize).prop_map(|(n, zeros)| format!("{n}{}", "9".repeat(zeros))),
    ]
}

/// One token to put where a parser expects one: a number, an edge word, or a few arbitrary
/// characters.
pub fn token() -> impl Strategy<Value = String> {
    prop_oneof![4 => number(), 3 => select(EDGE_WORDS).prop_map(str::to_string), 1 => text(6)]
}

/// Characters that end a token for [`mutated`].
const SEPARATORS: &[char] = &[' ', '\t', '\n', '=', ':', ',', '/', '"', '[', ']', '{', '}'];

/// One change [`mutated`] makes. Indexes count modulo the tokens (or bytes) there are.
#[derive(Clone, Debug)]
enum Mutation {
    /// The n-th token becomes this text.
    Replace(usize, String),
    /// The n-th token is removed.
    Remove(usize),
    /// The n-th token is written twice.
    Repeat(usize),
    /// This text is inserted at a byte offset.
    Insert(usize, String),
    /// The text ends at a byte offset (a file written half).
    Truncate(usize),
}

impl Mutation {
    fn apply(&self, s: &str) -> String {
        let tokens = token_spans(s);
        let nth = |n: usize| tokens.get(n % tokens.len().max(1)).copied();
        let at = |offset: usize| floor_char_boundary(s, offset % (s.len() + 1));
        let splice = |(start, end): (usize, usize), with: &str| format!("{}{with}{}", &s[..start], &s[end..]);
        match self {
            Mutation::Replace(n, with) => nth(*n).map_or_else(|| with.clone(), |span| splice(span, with)),
            Mutation::Remove(n) => nth(*n).map_or_else(String::new, |span| splice(span, "")),
            Mutation::Repeat(n) => nth(*n).map_or_else(String::new, |(a, b)| splice((a, b), &s[a..b].repeat(2))),
            Mutation::Insert(offset, with) => splice((at(*offset), at(*offset)), with),
            Mutation::Truncate(offset) => s[..at(*offset)].to_string(),
        }
    }
}

/// The byte spans of the tokens of `s` (runs of characters that are not [`SEPARATORS`]).
fn token_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices().chain([(s.len(), ' ')]) {
        match (start, SEPARATORS.contains(&c)) {
            (None, false) => start = Some(i),
            (Some(a), true) => {
                spans.push((a, i));
                start = None;
            }
            _ => {}
        }
    }
    spans
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<usize>(), token()).prop_map(|(n, t)| Mutation::Replace(n, t)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Repeat),
        2 => (any::<usize>(), token()).prop_map(|(at, t)| Mutation::Insert(at, t)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
    ]
}

/// `valid` text with up to three mutations applied (none in some cases: the valid text itself).
pub fn mutated(valid: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    (valid, prop::collection::vec(mutation(), 0..=3)).prop_map(|(s, ms)| ms.iter().fold(s, |s, m| m.apply(&s)))
}

/// Lines from `line`, up to `max` of them, joined as a file (with or without a final newline).
pub fn lines(line: impl Strategy<Value = String>, max: usize) -> impl Strategy<Value = String> {
    (prop::collection::vec(line, 0..=max), any::<bool>()).prop_map(|(lines, end)| {
        let mut text = lines.join("\n");
        if end && !text.is_empty() {
            text.push('\n');
        }
        text
    })
}

/// Whether an error message is clear: not empty, on one line, without control characters (a
/// terminal must not interpret what a file contained).
pub fn is_clear(message: &str) -> bool {
    !message.trim().is_empty() && !message.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_act_on_tokens_and_char_boundaries() {
        let line = "8:16 rbps=10 é=x";
        assert_eq!(token_spans(line), [(0, 1), (2, 4), (5, 9), (10, 12), (13, 15), (16, 17)]);
        assert_eq!(Mutation::Replace(3, "max".into()).apply(line), "8:16 rbps=max é=x");
        assert_eq!(Mutation::Replace(8, "".into()).apply(line), "8:16 =10 é=x", "counted modulo the tokens");
        assert_eq!(Mutation::Remove(0).apply(line), ":16 rbps=10 é=x");
        assert_eq!(Mutation::Repeat(1).apply(line), "8:1616 rbps=10 é=x");
        assert_eq!(Mutation::Truncate(14).apply(line), "8:16 rbps=10 ", "cut inside 'é': at its start");
        assert_eq!(Mutation::Insert(4, "\0".into()).apply(line), "8:16\0 rbps=10 é=x");
        assert_eq!(Mutation::Replace(0, "x".into()).apply(""), "x");
    }

    #[test]
    fn clear_messages_are_one_printable_line() {
        assert!(is_clear("invalid io.max '8:16 rbps': expected key=value"));
        for unclear in ["", " ", "bad\nline", "bad \0 byte", "\u{1b}[31mred"] {
            assert!(!is_clear(unclear), "{unclear:?}");
        }
    }

    #[test]
    fn cases_default_without_the_variable() {
        if std::env::var_os(CASES_ENV).is_none() {
            assert_eq!(cases(), DEFAULT_CASES);
        }
        assert!(config().failure_persistence.is_none());
    }
}
