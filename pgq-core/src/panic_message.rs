//! What a panic said: its message, for the error that records it.

use std::any::Any;

/// The message of a panic's payload (`panic!("..")` gives a `&str` or a `String`).
pub(crate) fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(message) => (*message).to_owned(),
            Err(_) => "a non-string panic payload".to_owned(),
        },
    }
}
