//! [`Problem`]: a handler's failure, rendered as a page with the right status.

use axum::extract::rejection::{FormRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::csrf::Refusal;
use crate::dashboard::Dashboard;
use crate::page;

/// What went wrong while answering a request.
#[derive(Debug)]
pub(crate) enum Problem {
    /// The request asked for something invalid (a filter, a queue name, a form).
    BadRequest(String),
    /// No such job.
    NotFound(String),
    /// An action on a read-only dashboard, or a POST without a valid token.
    Forbidden(String),
    /// The database or pgq failed.
    Internal(String),
    /// The request could not be read: a form body of the wrong type, too large or malformed,
    /// or a query string that does not parse. The status is the reader's (415, 413, 400, 422).
    Unreadable(StatusCode, String),
}

impl From<FormRejection> for Problem {
    fn from(rejection: FormRejection) -> Self {
        Problem::Unreadable(rejection.status(), rejection.body_text())
    }
}

impl From<QueryRejection> for Problem {
    fn from(rejection: QueryRejection) -> Self {
        Problem::Unreadable(rejection.status(), rejection.body_text())
    }
}

impl From<PathRejection> for Problem {
    fn from(rejection: PathRejection) -> Self {
        Problem::Unreadable(rejection.status(), rejection.body_text())
    }
}

impl From<pgq_core::Error> for Problem {
    fn from(err: pgq_core::Error) -> Self {
        match err {
            pgq_core::Error::InvalidFilter(_) | pgq_core::Error::InvalidQueue { .. } => {
                Problem::BadRequest(err.to_string())
            }
            pgq_core::Error::JobNotFound(_) => Problem::NotFound(err.to_string()),
            err => Problem::Internal(err.to_string()),
        }
    }
}

impl From<Refusal> for Problem {
    fn from(refusal: Refusal) -> Self {
        Problem::Forbidden(refusal.message().to_owned())
    }
}

impl Problem {
    /// The page for this problem.
    pub(crate) fn page(&self, dashboard: &Dashboard) -> Response {
        let (status, message) = match self {
            Problem::BadRequest(m) => (StatusCode::BAD_REQUEST, m),
            Problem::NotFound(m) => (StatusCode::NOT_FOUND, m),
            Problem::Forbidden(m) => (StatusCode::FORBIDDEN, m),
            Problem::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
            Problem::Unreadable(status, m) => (*status, m),
        };
        page::problem(dashboard, status, message)
    }
}

/// How much of a request a message repeats.
const ECHOED_CHARS: usize = 80;

/// `input` as a message repeats it: quoted, and cut to its first [`ECHOED_CHARS`] characters.
pub(crate) fn echoed(input: &str) -> String {
    let cut = cut(input);
    if cut.len() < input.len() {
        format!("{cut:?}…")
    } else {
        format!("{input:?}")
    }
}

/// `input`'s first [`ECHOED_CHARS`] characters: what a page shows of input it refused.
pub(crate) fn cut(input: &str) -> &str {
    match input.char_indices().nth(ECHOED_CHARS) {
        Some((end, _)) => &input[..end],
        None => input,
    }
}

/// A handler's result: a page, or a problem rendered with the dashboard's shell.
pub(crate) struct Answer(pub(crate) Dashboard, pub(crate) Result<Response, Problem>);

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        match self.1 {
            Ok(response) => response,
            Err(problem) => problem.page(&self.0),
        }
    }
}
