//! A job's metadata (the `meta` column): the user's tags, for operators to find jobs by, and
//! the trace context of the enqueue, so that the job's span joins the trace that made it.
//! Bounded and checked here, before the database's own bound (4 KiB) refuses it.

use std::collections::BTreeMap;

use crate::limits;

/// `meta` as written: `{"tags": {..}, "trace": {"traceparent": ..}}`, or `None` when there is
/// nothing to write, so that plain enqueues pay nothing. The trace is the current span's.
pub(crate) fn build(tags: &BTreeMap<String, String>) -> Result<Option<String>, String> {
    build_with(tags, crate::trace_context::current())
}

/// [`build`] without a trace: for a job no caller's span makes (a schedule's).
pub(crate) fn untraced(tags: &BTreeMap<String, String>) -> Result<Option<String>, String> {
    build_with(tags, None)
}

fn build_with(
    tags: &BTreeMap<String, String>,
    trace: Option<serde_json::Value>,
) -> Result<Option<String>, String> {
    if tags.len() > limits::MAX_TAGS {
        return Err(format!(
            "{} tags; at most {} are kept",
            tags.len(),
            limits::MAX_TAGS
        ));
    }
    for (key, value) in tags {
        if key.is_empty() || key.len() > limits::MAX_TAG_KEY_BYTES {
            return Err(format!(
                "tag name {:?}: 1 to {} bytes",
                shown(key),
                limits::MAX_TAG_KEY_BYTES
            ));
        }
        if value.len() > limits::MAX_TAG_VALUE_BYTES {
            return Err(format!(
                "tag {:?}: its value is longer than {} bytes",
                shown(key),
                limits::MAX_TAG_VALUE_BYTES
            ));
        }
        if key.chars().chain(value.chars()).any(char::is_control) {
            return Err(format!(
                "tag {:?}: no control characters in names or values",
                shown(key)
            ));
        }
    }
    let mut trace = trace;
    loop {
        if tags.is_empty() && trace.is_none() {
            return Ok(None);
        }
        let (text, stored) = measured(tags, trace.clone());
        if stored <= limits::MAX_META_BYTES {
            return Ok(Some(text));
        }
        // The trace context is a courtesy, and its `tracestate` comes from whoever called the
        // application (up to 32 vendors' entries): past the bound it goes, then the whole trace
        // context, before the tags are refused.
        trace = match trace {
            Some(serde_json::Value::Object(mut context)) if context.contains_key("tracestate") => {
                context.remove("tracestate");
                Some(serde_json::Value::Object(context))
            }
            Some(_) => None,
            None => {
                return Err(format!(
                    "the tags take {stored} bytes as JSON; at most {} are kept",
                    limits::MAX_META_BYTES
                ));
            }
        };
    }
}

/// `meta`'s text, and its size as the database's domain measures it: jsonb's text, a space
/// after each `:` and `,`.
fn measured(tags: &BTreeMap<String, String>, trace: Option<serde_json::Value>) -> (String, usize) {
    let mut meta = serde_json::Map::new();
    if !tags.is_empty() {
        meta.insert(
            "tags".into(),
            serde_json::to_value(tags).unwrap_or_default(),
        );
    }
    if let Some(trace) = trace {
        meta.insert("trace".into(), trace);
    }
    let meta = serde_json::Value::Object(meta);
    let text = meta.to_string();
    let stored = text.len() + separators(&meta);
    (text, stored)
}

/// The `:` and `,` between a value's entries, at every depth.
fn separators(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Object(map) => {
            2 * map.len() - usize::from(!map.is_empty())
                + map.values().map(separators).sum::<usize>()
        }
        serde_json::Value::Array(items) => {
            items.len().saturating_sub(1) + items.iter().map(separators).sum::<usize>()
        }
        _ => 0,
    }
}

fn shown(text: &str) -> String {
    text.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::build_with;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_trace_context_past_the_bound_goes_before_the_tags_are_refused() {
        let vendors: Vec<String> = (0..32)
            .map(|n| format!("v{n}={}", "x".repeat(200)))
            .collect();
        let trace = json!({"traceparent": PARENT, "tracestate": vendors.join(",")});
        // Alone: its parent stays, its state goes.
        let meta = build_with(&BTreeMap::new(), Some(trace.clone()))
            .unwrap()
            .unwrap();
        assert_eq!(meta, json!({"trace": {"traceparent": PARENT}}).to_string());
        // Tags that leave no room for even the parent: the tags are kept, the trace goes.
        let tags: BTreeMap<String, String> = (0..15)
            .map(|n| (format!("key{n:03}"), "v".repeat(256)))
            .collect();
        let meta = build_with(&tags, Some(trace)).unwrap().unwrap();
        assert!(!meta.contains("trace"), "{meta}");
        // Tags past the bound on their own are still refused.
        let tags: BTreeMap<String, String> = (0..16)
            .map(|n| (format!("key{n:03}"), "v".repeat(256)))
            .collect();
        let err = build_with(&tags, None).unwrap_err();
        assert!(err.starts_with("the tags take"), "{err}");
    }
}
