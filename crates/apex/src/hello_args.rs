//! The example pair's one argument, `--count N`, shared by both binaries (included with `#[path]`, so that
//! the binaries stay written against a653rs alone and this file stays out of the library).

/// `--count N` (a positive number), or nothing.
pub fn count_argument(mut args: impl Iterator<Item = String>) -> Result<Option<u64>, String> {
    match (args.next().as_deref(), args.next(), args.next()) {
        (None, ..) => Ok(None),
        (Some("--count"), Some(n), None) => n.parse::<u64>().ok().filter(|n| *n > 0).map(Some).ok_or_else(|| format!("--count {n:?} is not a positive number")),
        (Some(a), ..) => Err(format!("unexpected argument {a:?}")),
    }
}
