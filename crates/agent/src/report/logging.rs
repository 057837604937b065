//! The agent's log: `tracing` events on stderr, as text lines for a person or one JSON object per
//! line for a log collector (`--log-format json`).
//!
//! Levels, and what the agent logs at each:
//! - `error`: the agent stops (a write it cannot make).
//! - `warn`: it carries on with less (no eBPF observer, a model it cannot cache, a reload refused,
//!   a setting someone else changed, a process killed by an OOM).
//! - `info` (the default): start and stop, and one line per change it applies to the host from its
//!   configuration — a cgroup taken under control or let go, a weight, a cap, a memory setting, a
//!   setting restored on reload — and what the memory guard did.
//! - `debug`: one line per device per planning period (vrate, busy level, latency, limits written).
//! - `trace`: each limit the planner writes.
//!
//! The filter is `--log-level`, else the [`LOG_ENV`] environment variable, else `info`; either is
//! tracing-subscriber's `EnvFilter` syntax: a level (`debug`), or per module
//! (`ioshare_agent::backend::userspace=trace,info`). Code that runs the agent in-process beside output of its
//! own (the bench's agent scenario) calls [`init_in_process`]: the same log, at `warn` unless the
//! environment says otherwise; code that calls neither (most tests) logs nothing.

use std::io::IsTerminal;

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

use crate::error::{Error, Result};

/// The environment variable read for the filter when `--log-level` is not given.
pub const LOG_ENV: &str = "RUST_LOG";

/// The filter when neither `--log-level` nor [`LOG_ENV`] gives one.
pub const DEFAULT_LEVEL: &str = "info";

/// How log events are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One line per event: time, level, message, then `key=value` fields.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `message`, the fields, `target`.
    Json,
}

/// Installs the agent's log on stderr for the whole process, filtered by `level` (else [`LOG_ENV`],
/// else [`DEFAULT_LEVEL`]). Fails on a filter that does not parse, naming where it came from.
pub fn init(level: Option<&str>, format: LogFormat) -> Result<()> {
    let env = std::env::var(LOG_ENV).ok();
    let filter = filter(level, env.as_deref())?;
    let ansi = format == LogFormat::Text && std::io::stderr().is_terminal();
    tracing::subscriber::set_global_default(subscriber(filter, format, ansi, std::io::stderr))
        .map_err(|e| Error::Log(format!("cannot install the log: {e}")))
}

/// The filter [`init_in_process`] uses when [`LOG_ENV`] gives none: the agent's warnings and errors.
pub const IN_PROCESS_LEVEL: &str = "warn";

/// [`init`] for a process that runs the agent beside output of its own (`ioshare bench`): text on
/// stderr, filtered by [`LOG_ENV`], else [`IN_PROCESS_LEVEL`]. A process whose log is installed
/// already (by `init`, or an earlier call) keeps it.
pub fn init_in_process() -> Result<()> {
    static ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _once = ONCE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if tracing::dispatcher::has_been_set() {
        return Ok(());
    }
    let env_gives_one = std::env::var(LOG_ENV).is_ok_and(|e| !e.trim().is_empty());
    init((!env_gives_one).then_some(IN_PROCESS_LEVEL), LogFormat::Text)
}

/// The filter from `--log-level` (`level`), else the environment's value (`env`), else the default.
pub fn filter(level: Option<&str>, env: Option<&str>) -> Result<EnvFilter> {
    let (text, from) = match (level, env.filter(|e| !e.trim().is_empty())) {
        (Some(l), _) => (l, "--log-level"),
        (None, Some(e)) => (e, LOG_ENV),
        (None, None) => (DEFAULT_LEVEL, "the default"),
    };
    EnvFilter::try_new(text).map_err(|e| {
        Error::Log(format!(
            "{from} '{text}' is not a log filter ({e}): give a level (error, warn, info, debug, trace) or \
             module=level pairs, comma-separated"
        ))
    })
}

/// A subscriber writing events that pass `filter` to `writer` in `format` (`ansi`: colours, text only).
pub fn subscriber<W>(filter: EnvFilter, format: LogFormat, ansi: bool, writer: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.with_target(false).with_ansi(ansi).finish()),
        LogFormat::Json => Box::new(
            builder.json().flatten_event(true).with_current_span(false).with_span_list(false).with_ansi(false).finish(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Buffer {
            self.clone()
        }
    }

    /// What `level` lets through in `format`, for one event at each level.
    fn logged(level: &str, format: LogFormat) -> String {
        let buffer = Buffer::default();
        let sub = subscriber(filter(Some(level), None).unwrap(), format, false, buffer.clone());
        tracing::subscriber::with_default(sub, || {
            tracing::debug!(device = "loop3", vrate_pct = 99.5, "period");
            tracing::info!(cgroup = "tenants/a", weight = 300u32, "weight set");
            tracing::warn!("observer missing");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        text
    }

    #[test]
    fn the_level_filters_and_text_lines_carry_the_fields() {
        let info = logged("info", LogFormat::Text);
        assert_eq!(info.lines().count(), 2, "{info}");
        let line = info.lines().next().unwrap();
        assert!(line.contains(" INFO weight set cgroup=\"tenants/a\" weight=300"), "{line}");
        assert!(!info.contains("period"), "debug is below info: {info}");
        assert_eq!(logged("debug", LogFormat::Text).lines().count(), 3);
        assert_eq!(logged("warn", LogFormat::Text).lines().count(), 1);
    }

    #[test]
    fn json_is_one_object_per_line_with_flat_fields() {
        let json = logged("debug", LogFormat::Json);
        let lines: Vec<serde_json::Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3, "{json}");
        assert_eq!(lines[0]["level"], "DEBUG");
        assert_eq!(lines[0]["message"], "period");
        assert_eq!(lines[0]["device"], "loop3");
        assert_eq!(lines[0]["vrate_pct"], 99.5);
        assert_eq!(lines[1]["weight"], 300);
        assert!(lines[2]["timestamp"].is_string() && lines[2]["target"].is_string(), "{}", lines[2]);
    }

    #[test]
    fn the_flag_wins_over_the_environment_and_bad_filters_say_where_they_came_from() {
        assert!(filter(Some("debug"), Some("=bad=")).is_ok(), "the flag wins");
        let e = filter(None, Some("ioshare_agent=loud")).unwrap_err().to_string();
        assert!(e.contains("RUST_LOG 'ioshare_agent=loud' is not a log filter"), "{e}");
        let e = filter(Some("x=y=z"), None).unwrap_err().to_string();
        assert!(e.starts_with("--log-level 'x=y=z'"), "{e}");
        assert!(filter(None, Some("  ")).is_ok(), "an empty variable means the default");
    }
}
