//! Shell-style wildcards for topic and type names: `*` matches any run of characters, `?` one character.

/// True when `text` matches `pattern`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with backtracking to the last `*`: linear in practice, no recursion.
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn wildcards() {
        assert!(matches("*", ""));
        assert!(matches("*", "video/frames"));
        assert!(matches("video/*", "video/frames"));
        assert!(!matches("video/*", "audio/frames"));
        assert!(matches("*frames", "video/frames"));
        assert!(matches("v?deo/*s", "video/frames"));
        assert!(!matches("v?deo", "vdeo"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("a*b*c", "axxbyy"));
        assert!(matches("exact", "exact"));
        assert!(!matches("exact", "exactly"));
    }
}
