//! What applications spawn must be `Send`: every public future and handle, checked at compile
//! time (a failure here is a build error naming the future).

use pgq_core::{Client, EnqueueOptions, JobId, Task, Worker, WorkerHandle};

#[derive(serde::Serialize, serde::Deserialize, Task)]
struct Ping {
    n: u64,
}

fn send<T: Send>(_: T) {}

fn sync<T: Sync>() {}

#[test]
fn public_futures_and_handles_are_send() {
    sync::<Client>();
    sync::<Worker>();
    sync::<WorkerHandle>();
    sync::<pgq_core::JobWatch>();
    sync::<pgq_core::Error>();
}

/// Never run: each line fails to compile if its future cannot cross threads.
#[allow(dead_code)]
fn futures_are_send(client: Client, mut tx: sqlx::Transaction<'static, sqlx::Postgres>) {
    let id = JobId::from(1);
    let c = client.clone();
    send(async move { c.enqueue(Ping { n: 1 }).await });
    let c = client.clone();
    send(async move {
        c.enqueue_with(Ping { n: 1 }, EnqueueOptions::default())
            .await
    });
    let c = client.clone();
    send(async move { c.enqueue_in(&mut tx, Ping { n: 1 }).await });
    let c = client.clone();
    send(async move { c.enqueue_many(vec![Ping { n: 1 }]).await });
    let c = client.clone();
    send(async move { c.job(id).await });
    let c = client.clone();
    send(async move { c.watch(id).await?.next().await });
    let c = client.clone();
    send(async move { c.cancel(id).await });
    let c = client.clone();
    send(async move { c.retry(id).await });
    let c = client.clone();
    send(async move { c.stats().await });
    let c = client.clone();
    send(async move { c.rescue_expired().await });
    let c = client.clone();
    send(async move { c.delete_finished(Default::default()).await });
    let c = client.clone();
    send(async move { c.migrate().await });
    send(async move {
        let worker = Worker::builder(client).queue("default", 1).build()?;
        worker.start().shutdown().await
    });
}
