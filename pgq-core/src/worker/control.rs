//! The thread a worker's control loops run on: lease renewal, the listener, maintenance and
//! shutdown run on a single-threaded runtime of their own, while dispatchers and handlers run on
//! the application's runtime. A handler that blocks its thread (a blocking client,
//! `std::thread::sleep`) can stall the runtime it runs on — its timers and its network — and
//! with them everything else scheduled there; here it cannot stall the loops that keep leases,
//! rescue overrunning jobs and keep the shutdown's grace period.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The work and where to say it ended, taken by whichever runs it.
type Slot = Arc<Mutex<Option<(Work, oneshot::Sender<()>)>>>;

/// Runs `work` on a thread of its own and tells when it has ended. Where no thread can be
/// started, it runs on the caller's runtime instead.
pub(crate) fn spawn(work: impl Future<Output = ()> + Send + 'static) -> oneshot::Receiver<()> {
    let (ended, ended_rx) = oneshot::channel();
    let slot: Slot = Arc::new(Mutex::new(Some((Box::pin(work), ended))));
    let taken = slot.clone();
    let started = std::thread::Builder::new()
        .name("pgq-worker".into())
        .spawn(move || {
            let Some((work, ended)) = taken.lock().ok().and_then(|mut slot| slot.take()) else {
                return;
            };
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(work),
                Err(err) => tracing::error!(error = %err, "cannot build the worker's runtime"),
            }
            let _ = ended.send(());
        });
    if let Err(err) = started {
        tracing::warn!(error = %err, "cannot start the worker's thread; running on the application's runtime");
        if let Some((work, ended)) = slot.lock().ok().and_then(|mut slot| slot.take()) {
            tokio::spawn(async move {
                work.await;
                let _ = ended.send(());
            });
        }
    }
    ended_rx
}
