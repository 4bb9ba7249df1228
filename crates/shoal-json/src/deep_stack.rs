//! Room on the stack for deeply nested documents. Parsing and every operation on the parsed tree
//! recurse once or a few times per nesting level, and a document may nest up to `DEPTH_MAX`
//! levels, far more than the 2 MiB a test or tokio worker thread has. Each entry point measures
//! the nesting of its arguments with a cheap byte scan first: shallow documents (nearly all) run
//! on the caller's thread, deep ones on a scoped thread whose stack is sized for their depth.

use crate::error::JsonError;

/// Deepest nesting accepted; beyond it parsing fails with 54001 "stack depth limit exceeded",
/// as PostgreSQL does (with its default 2 MB max_stack_depth, somewhere past 14000 levels).
pub(crate) const DEPTH_MAX: usize = 10_000;

/// Nesting up to which work runs on the caller's stack.
const INLINE_DEPTH_MAX: usize = 100;

/// Stack reserved per nesting level on a deep-document thread, with room for a debug build's
/// frames (a few recursive calls per level).
const STACK_BYTES_PER_LEVEL: usize = 8 * 1024;

/// Stack for the work above the nested part (entry point, output buffers, formatting).
const STACK_BYTES_BASE: usize = 256 * 1024;

/// Runs `work` on a stack deep enough for documents as nested as `texts`.
pub(crate) fn run<T: Send>(
    texts: &[&str],
    work: impl FnOnce() -> Result<T, JsonError> + Send,
) -> Result<T, JsonError> {
    // Results can nest one argument inside another (concatenation, building), so depths add.
    let levels: usize = texts
        .iter()
        .map(|text| nesting_depth(text).min(DEPTH_MAX + 1))
        .sum();
    if levels <= INLINE_DEPTH_MAX {
        return work();
    }
    let stack_bytes = STACK_BYTES_BASE + (levels + 16) * STACK_BYTES_PER_LEVEL;
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("shoal-json-deep".to_string())
            .stack_size(stack_bytes)
            .spawn_scoped(scope, work);
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            // No thread to be had: the same answer PostgreSQL gives when out of stack.
            Err(_) => Err(JsonError::stack_depth_exceeded()),
        }
    })
}

/// How deeply `[` and `{` nest outside strings: an upper bound on the parser's recursion, exact
/// for valid json.
fn nesting_depth(text: &str) -> usize {
    // Every level takes at least one byte, so short texts need no scan.
    if text.len() <= INLINE_DEPTH_MAX {
        return text.len();
    }
    let mut depth = 0usize;
    let mut depth_max = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in text.as_bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                depth_max = depth_max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    depth_max
}

#[cfg(test)]
mod tests {
    use super::nesting_depth;

    #[test]
    fn nesting_ignores_brackets_in_strings() {
        let text = format!("{}{}", "[\"[[[\\\"[[\", ".repeat(60), "1");
        assert_eq!(nesting_depth(&text), 60);
        assert_eq!(nesting_depth(&"{\"a\": [".repeat(70)), 140);
    }
}
