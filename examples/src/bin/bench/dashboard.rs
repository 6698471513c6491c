//! What the dashboard's pages cost: each page requested over HTTP from the router served on a
//! local port, as a browser would, with the table as the standard workload left it.

use std::time::Instant;

use pgq_core::{Client, JobFilter, JobOrder, JobStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::measure::quantile;

/// The slowest page's median time in milliseconds, and which page it was: the overview, the
/// job list unfiltered and filtered to failed jobs (which reads the history a window at a
/// time), a finished job, the workers, the schedules.
pub(crate) async fn slowest_page(
    client: &Client,
    calls: usize,
) -> Result<(String, f64), Box<dyn std::error::Error + Send + Sync>> {
    // A search of the history reads a window of ids a page: follow pages until one has a job.
    let mut search = JobFilter::new()
        .status(JobStatus::Completed)
        .order(JobOrder::Oldest)
        .limit(1);
    let finished = loop {
        let page = client.jobs(&search).await?;
        if let Some(job) = page.jobs.first() {
            break job.id;
        }
        search = search.after(page.next.ok_or("the history has no completed job")?);
    };
    let app = pgq_web::router(client.clone(), pgq_web::DashboardConfig::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let pages = [
        "/".to_owned(),
        "/jobs".to_owned(),
        "/jobs?status=failed".to_owned(),
        format!("/jobs/{finished}"),
        "/workers".to_owned(),
        "/schedules".to_owned(),
    ];
    let mut slowest = (String::new(), 0.0);
    for page in pages {
        let mut times = Vec::new();
        for _ in 0..calls {
            let at = Instant::now();
            let status = get(&addr, &page).await?;
            times.push(at.elapsed().as_secs_f64() * 1000.0);
            if status != 200 {
                return Err(format!("{page} answered {status}").into());
            }
        }
        let median = quantile(&mut times, 0.50);
        if median > slowest.1 {
            slowest = (page, median);
        }
    }
    server.abort();
    Ok(slowest)
}

/// One GET over a fresh connection, read to its end; the status code.
async fn get(addr: &str, path: &str) -> Result<u16, Box<dyn std::error::Error + Send + Sync>> {
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let status = std::str::from_utf8(response.get(9..12).ok_or("a short answer")?)?.parse()?;
    Ok(status)
}
