//! The W3C trace context that travels with a job: captured from the enqueue's current span
//! into the job's `meta`, and made the parent of the attempt's span. With the `opentelemetry`
//! feature only: without it there is nothing to capture, and nothing is written.

/// The current span's trace context as `{"traceparent": ..}`, with `"tracestate"` when it has
/// one, if there is a context at all.
pub(crate) fn current() -> Option<serde_json::Value> {
    #[cfg(feature = "opentelemetry")]
    {
        use opentelemetry::propagation::TextMapPropagator;
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;

        let context = tracing::Span::current().context();
        if !context.span().span_context().is_valid() {
            return None;
        }
        let mut carrier = std::collections::HashMap::new();
        opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .inject_context(&context, &mut carrier);
        // The propagator writes an empty `tracestate` for a context without one.
        carrier.retain(|_, value: &mut String| !value.is_empty());
        serde_json::to_value(carrier).ok()
    }
    #[cfg(not(feature = "opentelemetry"))]
    None
}

/// Makes the trace context a job carries (its `meta`) the parent of `span`.
pub(crate) fn continue_in(span: &tracing::Span, meta: Option<&str>) {
    #[cfg(feature = "opentelemetry")]
    {
        use opentelemetry::propagation::TextMapPropagator;
        use tracing_opentelemetry::OpenTelemetrySpanExt;

        let Some(meta) = meta else { return };
        let Ok(meta) = serde_json::from_str::<serde_json::Value>(meta) else {
            return;
        };
        let Some(trace) = meta.get("trace").and_then(|t| t.as_object()) else {
            return;
        };
        let carrier: std::collections::HashMap<String, String> = trace
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        let parent =
            opentelemetry_sdk::propagation::TraceContextPropagator::new().extract(&carrier);
        let _ = span.set_parent(parent);
    }
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, meta);
}
