//! What a worker id may be: the name every job a worker holds carries, checked where one is
//! set (`WorkerBuilder::worker_id`) and where one is asked for (`Client::release_worker`).

use crate::error::{Error, Result};
use crate::limits;

/// `id` if it is a worker id: 1 to [`MAX_WORKER_ID_BYTES`](limits::MAX_WORKER_ID_BYTES)
/// bytes, no control characters.
pub(crate) fn validate(id: &str) -> Result<()> {
    let refuse = |reason: &str| {
        let shown: String = id.chars().take(40).collect();
        Err(Error::InvalidWorker(format!(
            "worker id {shown:?}: {reason}"
        )))
    };
    if id.is_empty() || id.len() > limits::MAX_WORKER_ID_BYTES {
        return refuse("a worker id has 1 to 128 bytes");
    }
    if id.chars().any(char::is_control) {
        return refuse("a worker id has no control characters");
    }
    Ok(())
}
