//! A job's payload as the dashboard shows it: pretty-printed, masked or hidden as configured.

use serde_json::Value;

use crate::config::PayloadView;

/// What replaces a masked value.
pub(crate) const MASK: &str = "•••";

/// The payload's text for the job page, or `None` when payloads are hidden.
pub(crate) fn shown(payload: &Value, view: &PayloadView) -> Option<String> {
    let value = match view {
        PayloadView::Shown => payload.clone(),
        PayloadView::Hidden => return None,
        PayloadView::Masked(keys) => {
            let mut value = payload.clone();
            mask(&mut value, keys);
            value
        }
    };
    Some(serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string()))
}

/// Replaces the value of every object key in `keys`, at any depth.
fn mask(value: &mut Value, keys: &[String]) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                if keys.iter().any(|k| k == key) {
                    *inner = Value::String(MASK.to_owned());
                } else {
                    mask(inner, keys);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| mask(item, keys)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{MASK, shown};
    use crate::config::PayloadView;

    #[test]
    fn masked_keys_are_replaced_at_any_depth() {
        let payload = json!({"user": 7, "password": "hunter2", "cards": [{"number": "4111"}]});
        let view = PayloadView::Masked(vec!["password".into(), "number".into()]);
        let text = shown(&payload, &view).unwrap();
        assert!(
            !text.contains("hunter2") && !text.contains("4111"),
            "{text}"
        );
        assert_eq!(text.matches(MASK).count(), 2);
        assert!(text.contains("\"user\": 7"));
    }

    #[test]
    fn hidden_payloads_are_not_shown_and_shown_ones_are_pretty() {
        let payload = json!({"a": 1});
        assert_eq!(shown(&payload, &PayloadView::Hidden), None);
        assert_eq!(
            shown(&payload, &PayloadView::Shown).unwrap(),
            "{\n  \"a\": 1\n}"
        );
    }
}
