//! Fuzz target of the memory crate's one text format, sizes as a configuration writes them (`2G`,
//! `512MiB`, `4096`), and of the watermarks computed from a parsed limit. Property (see
//! `ioshare_testkit::fuzz`): never a panic; a clear error, or the number of bytes the text says.
//! `IOSHARE_FUZZ_CASES` sets the cases.

use ioshare_memory::{parse_size, Watermarks};
use ioshare_testkit::fuzz::{self, is_clear, lossy_text, mutated, text};
use proptest::prelude::*;
use proptest::sample::select;

/// A valid size: a number, maybe padded, with any suffix of any case; and its bytes (`None`: more
/// than a u64 holds).
fn size() -> impl Strategy<Value = (String, Option<u64>)> {
    let suffix = select(vec![("", 0), ("K", 10), ("m", 20), ("G", 30), ("t", 40)]);
    let unit = select(vec!["", "B", "iB"]);
    let pad = select(vec!["", " ", "  "]);
    (any::<u64>().prop_map(|n| n >> (n % 64)), suffix, unit, pad).prop_map(|(n, (letter, shift), unit, pad)| {
        let unit = if letter.is_empty() && unit == "iB" { "" } else { unit };
        (format!("{pad}{n}{pad}{letter}{unit}{pad}"), n.checked_mul(1 << shift))
    })
}

proptest! {
    #![proptest_config(fuzz::config())]

    #[test]
    fn sizes(text in prop_oneof![1 => lossy_text(24), 1 => text(16), 4 => mutated(size().prop_map(|(t, _)| t))]) {
        match parse_size(&text) {
            Ok(bytes) => prop_assert_eq!(parse_size(&bytes.to_string()).unwrap(), bytes),
            Err(e) => prop_assert!(is_clear(&e.to_string()), "{:?}", e.to_string()),
        }
    }

    #[test]
    fn valid_sizes_give_their_bytes((text, bytes) in size()) {
        prop_assert_eq!(parse_size(&text).ok(), bytes, "{:?}", text);
    }

    #[test]
    fn watermarks_lie_below_any_limit(limit in any::<u64>(), ratio in 0u32..=100, scale in 1u32..=1000) {
        if let Some(w) = Watermarks::new(limit, ratio, scale) {
            prop_assert!(w.low <= w.high && w.high <= limit, "{:?} of {}", w, limit);
        }
    }
}

/// Found by `sizes` (`\0`): the error quoted the text's control characters raw; they are escaped
/// now, so the error is one printable line.
#[test]
fn a_size_error_quotes_control_characters_escaped() {
    let msg = parse_size("2\nG\0").unwrap_err().to_string();
    assert!(is_clear(&msg) && msg.contains("'2\\nG\\u{0}'"), "{msg}");
}
