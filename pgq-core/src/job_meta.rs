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
    if tags.is_empty() && trace.is_none() {
        return Ok(None);
    }
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
    // Measured as the database's domain measures it: jsonb's text, a space after each `:`
    // and `,`.
    let stored = text.len() + separators(&meta);
    if stored > limits::MAX_META_BYTES {
        return Err(format!(
            "the tags take {stored} bytes as JSON; at most {} are kept",
            limits::MAX_META_BYTES
        ));
    }
    Ok(Some(text))
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
