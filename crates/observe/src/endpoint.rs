//! A Prometheus scrape endpoint, shared by `ioshare observe` and the agent: tiny_http answers
//! `GET /metrics` on a thread of its own with a prometheus-client [`Registry`] encoded in the text
//! format 0.0.4 at the time of the scrape (its collectors read their state then); any other path gets
//! 404. [`family`] writes one metric family from plain values, for collectors over existing state
//! (nothing is counted twice: a collector reads what its program already keeps).
//!
//! The endpoint stops when dropped (the port is free again when `drop` returns). Addresses are
//! explicit: [`parse_addr`] binds a bare port to 127.0.0.1, so listening beyond the host must be
//! spelled out (`0.0.0.0:9435`).

use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use prometheus_client::encoding::prometheus_text::{encode, CONTENT_TYPE};
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::registry::Registry;
use tiny_http::{Header, Method, Request, Response, Server};

use crate::error::{Error, Result};

/// A running `/metrics` endpoint; stops when dropped.
pub struct Endpoint {
    server: Option<Arc<Server>>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").field("addr", &self.addr).finish()
    }
}

impl Endpoint {
    /// Binds `addr` and serves `registry` until dropped; `program` names the server in the body of a
    /// 404 (`"ioshare observe"`).
    pub fn serve(addr: SocketAddr, registry: Registry, program: &str) -> Result<Endpoint> {
        let listen_error = |source| Error::Listen { addr: addr.to_string(), source };
        let listener = TcpListener::bind(addr).map_err(listen_error)?;
        let bound = listener.local_addr().map_err(listen_error)?;
        let server =
            Arc::new(Server::from_listener(listener, None).map_err(|e| listen_error(std::io::Error::other(e)))?);
        let not_found = format!("{program} serves /metrics\n");
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let mut size = 0;
                for request in serving.incoming_requests() {
                    answer(request, &registry, &not_found, &mut size);
                }
            })
            .map_err(listen_error)?;
        Ok(Endpoint { server: Some(server), thread: Some(thread), addr: bound })
    }

    /// The address bound (the real port when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let Some(server) = self.server.take() else { return };
        server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The last reference: tiny_http wakes its accept thread, which closes the listener soon after
        // (it is not joined). Wait (bounded) until nothing answers, so the port can be bound again.
        drop(server);
        for _ in 0..100 {
            if std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(10)).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Answers one request: the registry's exposition for `GET /metrics` (`size`: the last one's
/// length), 404 for anything else.
fn answer(request: Request, registry: &Registry, not_found: &str, size: &mut usize) {
    let url = request.url();
    let metrics = *request.method() == Method::Get && (url == "/metrics" || url.starts_with("/metrics?"));
    // A failed respond is a scraper that went away: nothing to do.
    if !metrics {
        let _ = request.respond(Response::from_string(not_found).with_status_code(404));
        return;
    }
    // Room for the last exposition and a little more: no copying while the body grows.
    let mut body = String::with_capacity(*size + *size / 8);
    if encode(&mut body, registry).is_err() {
        let _ = request.respond(Response::from_string("encoding the metrics failed\n").with_status_code(500));
        return;
    }
    *size = body.len();
    // The length is known: always send it (tiny_http would switch to chunked above 32 KiB).
    let content_type = Header::from_bytes("Content-Type", CONTENT_TYPE).expect("a valid header");
    let response = Response::from_string(body).with_header(content_type).with_chunked_threshold(usize::MAX);
    let _ = request.respond(response);
}

/// Writes one metric family: its HELP and TYPE lines, then one sample (or histogram) per
/// `(labels, metric)` of `series`. `name` is the full name without `_total` (a counter gets it).
pub fn family<L, M>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, M)>,
) -> fmt::Result
where
    L: EncodeLabelSet,
    M: EncodeMetric + TypedMetric,
{
    let mut metric = encoder.encode_descriptor(name, help, None, M::TYPE)?;
    for (labels, m) in series {
        m.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Parses a listen address: `HOST:PORT`, or just `PORT` (then bound to 127.0.0.1, this host only).
pub fn parse_addr(spec: &str) -> Option<SocketAddr> {
    match spec.parse::<u16>() {
        Ok(port) => Some(SocketAddr::from(([127, 0, 0, 1], port))),
        Err(_) => spec.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use prometheus_client::collector::Collector;
    use prometheus_client::metrics::gauge::ConstGauge;

    use super::*;

    #[derive(Debug)]
    struct Two;

    impl Collector for Two {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            let series = [("a", 1.5), ("b", 2.0)].map(|(k, v)| ([("key", k)], ConstGauge::new(v)));
            family(&mut encoder, "test_value_ratio", "A value.", series)
        }
    }

    fn get(addr: SocketAddr, path: &str) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply
    }

    #[test]
    fn serves_the_registry_at_metrics_only_and_frees_the_port_when_dropped() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Two));
        let endpoint = Endpoint::serve(parse_addr("0").unwrap(), registry, "test").unwrap();
        let addr = endpoint.addr();
        let reply = get(addr, "/metrics");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.contains("text/plain; version=0.0.4"), "{reply}");
        assert!(reply.contains("# HELP test_value_ratio A value.\n# TYPE test_value_ratio gauge\n"), "{reply}");
        assert!(reply.contains("test_value_ratio{key=\"a\"} 1.5\ntest_value_ratio{key=\"b\"} 2.0\n"), "{reply}");
        let missing = get(addr, "/");
        assert!(missing.starts_with("HTTP/1.1 404") && missing.ends_with("test serves /metrics\n"), "{missing}");
        drop(endpoint);
        assert!(std::net::TcpStream::connect(addr).is_err(), "nothing listens after drop");
    }

    #[test]
    fn bare_port_binds_localhost() {
        assert_eq!(parse_addr("9435"), Some(SocketAddr::from(([127, 0, 0, 1], 9435))));
        assert_eq!(parse_addr("0.0.0.0:1"), Some(SocketAddr::from(([0, 0, 0, 0], 1))));
        assert_eq!(parse_addr("localhost:x"), None);
    }
}
