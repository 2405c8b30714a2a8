//! `/metrics` over HTTP: one thread, answering each scrape with what the
//! reporter last published. A scrape costs the encoding of the registry,
//! never a lock the workers take.

use std::net::SocketAddr;
use std::sync::Arc;

use super::Metrics;

/// The content type of OpenMetrics text.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A listening endpoint: its address, and the server its thread serves.
pub(crate) struct Endpoint {
    pub addr: SocketAddr,
    server: Arc<tiny_http::Server>,
}

impl Endpoint {
    /// Listens on `addr` (port 0: any free port, as tests ask); `Err` says
    /// why it cannot (a port in use, an address not on this host).
    pub fn listen(addr: SocketAddr) -> Result<Endpoint, String> {
        let server = tiny_http::Server::http(addr)
            .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| format!("cannot serve metrics on {addr}: not an IP address"))?;
        Ok(Endpoint {
            addr,
            server: Arc::new(server),
        })
    }

    /// Serves `metrics` on a thread of its own until the process ends.
    pub fn serve(&self, metrics: Arc<Metrics>) -> std::io::Result<()> {
        let server = Arc::clone(&self.server);
        std::thread::Builder::new()
            .name("mx-metrics".to_string())
            .spawn(move || {
                for request in server.incoming_requests() {
                    answer(request, &metrics);
                }
            })
            .map(drop)
    }
}

/// `GET /metrics`: the text; anything else: 404 (405 for another method).
fn answer(request: tiny_http::Request, metrics: &Metrics) {
    let path = request.url().split('?').next().unwrap_or_default();
    let response = match (request.method(), path) {
        (tiny_http::Method::Get, "/metrics") => {
            let header =
                tiny_http::Header::from_bytes("Content-Type", OPENMETRICS).expect("a valid header");
            tiny_http::Response::from_string(metrics.encode()).with_header(header)
        }
        (tiny_http::Method::Get, _) => {
            tiny_http::Response::from_string("mx agent: the metrics are at /metrics\n")
                .with_status_code(404)
        }
        _ => tiny_http::Response::from_string("GET only\n").with_status_code(405),
    };
    // A scraper that hung up before its answer: nothing to do.
    let _ = request.respond(response);
}
