//! Payload sizes as people write them: `64`, `1k`, `1KiB`, `16KiB`, `2M` (the applications' and the
//! benchmarks' command lines).

/// A byte count that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("size {text:?}: {reason}")]
pub struct BadSize {
    pub text: String,
    pub reason: String,
}

/// Parses a byte count. `k`/`K`/`KiB`/`kB`/`KB` all mean 1024, `M`/`MiB`/`MB` 1024², so that `1k` and `1KiB`
/// are the same payload. Zero is refused: a request/response needs something to carry.
pub fn parse_size(text: &str) -> Result<usize, BadSize> {
    let bad = |reason: &str| BadSize { text: text.to_string(), reason: reason.to_string() };
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(bad("expected a number of bytes such as 64, 1k, 1KiB or 16KiB"));
    }
    let n: usize = digits.parse().map_err(|_| bad("number too large"))?;
    let mult: usize = match unit.trim() {
        "" | "B" | "b" => 1,
        "k" | "K" | "KiB" | "kiB" | "kB" | "KB" | "kb" => 1024,
        "M" | "m" | "MiB" | "MB" | "mb" => 1024 * 1024,
        _ => return Err(bad("unknown unit (use k, KiB, M or MiB)")),
    };
    let bytes = n.checked_mul(mult).ok_or_else(|| bad("number too large"))?;
    if bytes == 0 {
        return Err(bad("the payload must be at least 1 byte"));
    }
    Ok(bytes)
}

/// The short form used in scenario names and file names: `64`, `1KiB`, `1500`, `2MiB`.
pub fn format_size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{}MiB", bytes / (1024 * 1024))
    } else if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{}KiB", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_suffixed_sizes() {
        assert_eq!(parse_size("64").unwrap(), 64);
        assert_eq!(parse_size("1k").unwrap(), 1024);
        assert_eq!(parse_size("1KiB").unwrap(), 1024);
        assert_eq!(parse_size("16KiB").unwrap(), 16384);
        assert_eq!(parse_size("2M").unwrap(), 2 * 1024 * 1024);
        assert_eq!(parse_size(" 100B ").unwrap(), 100);
    }

    #[test]
    fn refused_sizes() {
        for t in ["0", "0k", "", "k", "12x", "-5", "1.5k", "99999999999999999999999"] {
            let e = parse_size(t).unwrap_err();
            assert_eq!(e.text, t, "{t}: {e}");
        }
    }

    #[test]
    fn short_form_round_trips() {
        for t in ["64", "1KiB", "16KiB", "1500", "2MiB"] {
            assert_eq!(format_size(parse_size(t).unwrap()), t);
        }
    }
}
