//! Redis's glob patterns (`stringmatchlen` in util.c), for KEYS, SCAN MATCH and CONFIG GET:
//! `*` any run, `?` any byte, `[abc]`, `[^a-z]` classes, `\x` the byte x.

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    match_from(pattern, text, 0)
}

/// Redis bounds the recursion of `*` to keep a pattern from taking the server's stack.
const NESTING_MAX: usize = 1000;

fn match_from(mut p: &[u8], mut t: &[u8], nesting: usize) -> bool {
    if nesting > NESTING_MAX {
        return false;
    }
    while let Some(&c) = p.first() {
        match c {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                for start in 0..=t.len() {
                    if match_from(&p[1..], &t[start..], nesting + 1) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if t.is_empty() {
                    return false;
                }
                t = &t[1..];
                p = &p[1..];
            }
            b'[' => {
                let Some(&byte) = t.first() else {
                    return false;
                };
                p = &p[1..];
                let negate = p.first() == Some(&b'^');
                if negate {
                    p = &p[1..];
                }
                let mut found = false;
                loop {
                    match p {
                        [] => break,
                        [b'\\', x, rest @ ..] => {
                            found |= *x == byte;
                            p = rest;
                        }
                        [b']', ..] => break,
                        [lo, b'-', hi, rest @ ..] if *hi != b']' => {
                            let (lo, hi) = if lo <= hi { (*lo, *hi) } else { (*hi, *lo) };
                            found |= (lo..=hi).contains(&byte);
                            p = rest;
                        }
                        [x, rest @ ..] => {
                            found |= *x == byte;
                            p = rest;
                        }
                    }
                }
                // Past the closing bracket (a pattern may end without one).
                if !p.is_empty() {
                    p = &p[1..];
                }
                if found == negate {
                    return false;
                }
                t = &t[1..];
            }
            b'\\' if p.len() >= 2 => {
                if t.first() != Some(&p[1]) {
                    return false;
                }
                t = &t[1..];
                p = &p[2..];
            }
            _ => {
                if t.first() != Some(&c) {
                    return false;
                }
                t = &t[1..];
                p = &p[1..];
            }
        }
    }
    t.is_empty()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_as_redis_matches_them() {
        let yes = |p: &str, t: &str| assert!(matches(p.as_bytes(), t.as_bytes()), "{p} ~ {t}");
        let no = |p: &str, t: &str| assert!(!matches(p.as_bytes(), t.as_bytes()), "{p} !~ {t}");
        yes("*", "");
        yes("*", "anything");
        yes("h?llo", "hello");
        no("h?llo", "hllo");
        yes("h*llo", "heeeello");
        yes("h[ae]llo", "hallo");
        no("h[ae]llo", "hillo");
        yes("h[^e]llo", "hallo");
        no("h[^e]llo", "hello");
        yes("h[a-b]llo", "hbllo");
        yes("h[b-a]llo", "hallo");
        yes("key:\\*", "key:*");
        no("key:\\*", "key:x");
        yes("user:*:name", "user:42:name");
        no("user:*:name", "user:42:age");
        yes("max*", "maxmemory");
        no("a", "ab");
    }
}
