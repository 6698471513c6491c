//! Percent-encoding of values put into the dashboard's own query strings.

/// A value percent-encoded for a query string.
pub(crate) fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn reserved_bytes_are_encoded() {
        assert_eq!(
            super::encode("mail:eu a&b=c/ü"),
            "mail%3Aeu%20a%26b%3Dc%2F%C3%BC"
        );
        assert_eq!(super::encode("plain-name_1.x~"), "plain-name_1.x~");
    }
}
