//! Reading and writing the dashboard's two cookies (the CSRF nonce and the login session).

use axum::http::HeaderMap;
use axum::http::header::COOKIE;

/// The value of cookie `name` in the request, if it has one.
pub(crate) fn get<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// A `Set-Cookie` value: HttpOnly and `SameSite=Strict`, so that no script reads it and no
/// other site's request carries it.
pub(crate) fn set(name: &str, value: &str, path: &str) -> String {
    format!("{name}={value}; Path={path}; HttpOnly; SameSite=Strict")
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    #[test]
    fn finds_a_cookie_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert("cookie", HeaderValue::from_static("a=1; pgq_csrf=abc; b=2"));
        assert_eq!(super::get(&headers, "pgq_csrf"), Some("abc"));
        assert_eq!(super::get(&headers, "pgq"), None);
    }
}
