//! Action and login bodies, read strictly: a form whose escapes or text are broken is refused
//! (400), where a lenient reader would go on with the broken parts replaced.

use axum::Form;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FormRejection};
use axum::extract::{FromRequest as _, Request};
use axum::http::header::CONTENT_TYPE;

use crate::dashboard::Dashboard;
use crate::problem::Problem;

/// A form's fields, in the order sent.
pub(crate) type Fields = Vec<(String, String)>;

/// The fields of an `application/x-www-form-urlencoded` body of at most 2 MiB: anything else is
/// refused as unreadable (415, 413), and a body that is not ASCII, holds a `%` not followed by
/// two hex digits, or escapes bytes that are not UTF-8, as malformed (400).
pub(crate) async fn fields(request: Request, dashboard: &Dashboard) -> Result<Fields, Problem> {
    let is_form = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| {
            mime.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        // Refused (415) by the form reader before any of the body is read.
        return read(request, dashboard).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), dashboard)
        .await
        .map_err(|rejection: BytesRejection| {
            Problem::Unreadable(rejection.status(), rejection.body_text())
        })?;
    if let Err(reason) = well_formed(&bytes) {
        return Err(Problem::BadRequest(format!("malformed form: {reason}")));
    }
    read(Request::from_parts(parts, bytes.into()), dashboard).await
}

/// The fields as axum's form reader reads them.
async fn read(request: Request, dashboard: &Dashboard) -> Result<Fields, Problem> {
    let Form(fields) = Form::<Fields>::from_request(request, dashboard)
        .await
        .map_err(|rejection: FormRejection| Problem::from(rejection))?;
    Ok(fields)
}

/// Whether `body` is what a form encodes: ASCII, whole `%XX` escapes, and UTF-8 once decoded.
fn well_formed(body: &[u8]) -> Result<(), &'static str> {
    if !body.is_ascii() {
        return Err("it holds bytes that are not ASCII");
    }
    let hex = |byte: u8| char::from(byte).to_digit(16).map(|digit| digit as u8);
    let mut decoded = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            match tail {
                [high, low, after @ ..] => match (hex(*high), hex(*low)) {
                    (Some(high), Some(low)) => {
                        decoded.push(high << 4 | low);
                        rest = after;
                        continue;
                    }
                    _ => return Err("a % is not followed by two hex digits"),
                },
                _ => return Err("a % is not followed by two hex digits"),
            }
        }
        // `&`, `=` and `+` decode to ASCII, which keeps UTF-8 valid wherever the fields split.
        decoded.push(byte);
        rest = tail;
    }
    std::str::from_utf8(&decoded)
        .map(drop)
        .map_err(|_| "its escapes are not UTF-8")
}

#[cfg(test)]
mod tests {
    use super::well_formed;

    #[test]
    fn broken_escapes_and_text_are_malformed() {
        for body in [
            &b"action=retry&id=1&csrf=abc"[..],
            b"token=s%C3%A9same+ouvre-toi",
            b"",
            b"a=%25",
        ] {
            assert_eq!(well_formed(body), Ok(()), "{body:?}");
        }
        for body in [
            &b"token=%FF"[..],
            b"token=%",
            b"token=%4",
            b"token=%ZZ",
            b"token=\xff",
            b"token=%C3",
        ] {
            assert!(well_formed(body).is_err(), "{body:?}");
        }
    }
}
