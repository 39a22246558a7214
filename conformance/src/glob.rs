//! The `*` and `?` patterns of `--filter` and known-failure lists.

/// True when `text` matches `pattern`: `*` matches any run of characters (dots included),
/// `?` any one character, anything else itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    // Greedy matching with one backtrack point, the classic linear-space wildcard walk.
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == '?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == '*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((star_p, star_t)) = star {
            p = star_p + 1;
            t = star_t + 1;
            star = Some((star_p, star_t + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

/// True when `text` matches any of the comma-separated patterns in `patterns`.
pub fn any_glob_matches(patterns: &str, text: &str) -> bool {
    patterns
        .split(',')
        .map(str::trim)
        .filter(|pattern| !pattern.is_empty())
        .any(|pattern| glob_matches(pattern, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_and_question_marks_match_as_in_a_shell() {
        assert!(glob_matches("memory.*", "memory.copy.overlap"));
        assert!(glob_matches("*copy*", "memory.copy.overlap"));
        assert!(glob_matches("memory.copy.?verlap", "memory.copy.overlap"));
        assert!(glob_matches("*", ""));
        assert!(!glob_matches("memory.*", "streams.memory"));
        assert!(!glob_matches("memory.copy", "memory.copy.overlap"));
        assert!(glob_matches("a*b*c", "aXbYbZc"));
        assert!(!glob_matches("a*b*c", "aXbYbZ"));
    }

    #[test]
    fn a_list_matches_when_any_pattern_does() {
        assert!(any_glob_matches("events.*, memory.fill.*", "memory.fill.pattern_u8"));
        assert!(!any_glob_matches("events.*,", "memory.fill.pattern_u8"));
    }
}
