//! The configuration a C caller opens a database with: JSON or TOML text, a
//! path to a `.json`/`.toml` file, or the `STRATA_CONFIG` variable, applied
//! key by key onto `strata::Options`.
//!
//! Owns: the list of config keys ([`KEYS`]), how text is told apart from a
//! path, and the error messages for unknown keys and bad values.
//! Invariants: a key not in [`KEYS`] is an error, never ignored; a config that
//! fails leaves no half-applied options behind (loading works on a copy).
//! Thread-safety: plain data, no sharing.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::engine;
use crate::error::FfiError;

/// The environment variable read when the caller passes no configuration.
pub const CONFIG_ENV: &str = "STRATA_CONFIG";

/// Every key a configuration may hold, with what it sets.
pub const KEYS: &[(&str, &str)] = &[
    (
        "path",
        "database directory (used when the caller passes no path)",
    ),
    ("io_mode", "\"buffered\" | \"direct\" | \"direct-rw\""),
    ("io_engine", "\"sync\" | \"io-uring\""),
    (
        "layer_size_bytes_max",
        "bytes, integer or string with K/M/G/KiB/MiB/GiB suffix",
    ),
    (
        "writer_buffer_bytes",
        "bytes, integer or string with suffix",
    ),
    (
        "value_size_bytes_max",
        "bytes, integer or string with suffix",
    ),
    ("fallback_to_buffered", "true | false"),
    (
        "alignment_bytes",
        "direct-I/O alignment override, a power of two; null or \"none\" = the kernel's",
    ),
    (
        "history_lsns",
        "versions kept readable below the last LSN; null or \"none\" = all",
    ),
    (
        "delta_block_bytes",
        "target data block size of delta layers, bytes",
    ),
    ("background_flush", "true | false"),
    (
        "frozen_layers_max",
        "most frozen layers waiting for their flush before writers stall (1 ..= 1024)",
    ),
    ("create_if_missing", "true | false"),
    (
        "remote",
        "remote store URL: s3://bucket/prefix (a build with the s3 feature), file:///dir or a path; null or \"none\" = local only",
    ),
    (
        "local_layer_bytes_max",
        "with a remote store: most bytes of layer files kept locally (the least recently read ones the store holds are evicted); null or \"none\" = no budget",
    ),
    (
        "remote_follower",
        "true | false: open as a read-only follower of the remote store (its newest index; strata_refresh_remote moves on)",
    ),
    (
        "remote_follow_interval_ms",
        "a follower refreshes to the store's newest index this often, milliseconds (default 60000, at least 10); null or \"none\" = only strata_refresh_remote",
    ),
    (
        "remote_deletion_delay_ms",
        "with a remote store: milliseconds an object no index lists any more stays in it before the writer deletes it (default 300000)",
    ),
    (
        "remote_single_put_bytes_max",
        "with a remote store: files of up to this many bytes go in one PUT, read whole (two held at most); larger ones, and the first of a round of uploads when over 8 MiB, in 8 MiB parts (default 83886080; 0: every file in parts)",
    ),
];

/// Engine options plus the database path a configuration may carry.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub options: engine::Options,
    /// The `path` key; empty when the configuration gave none.
    pub path: Option<PathBuf>,
}

impl Config {
    /// Applies `config` (text or file path; `None` reads `STRATA_CONFIG`,
    /// and an unset or empty variable applies nothing).
    pub fn load(&mut self, config: Option<&str>) -> Result<(), FfiError> {
        let (text, source) = match config {
            Some(c) => (c.to_string(), None),
            None => match std::env::var(CONFIG_ENV) {
                Ok(v) => (v, Some(format!("${CONFIG_ENV}"))),
                Err(std::env::VarError::NotPresent) => return Ok(()),
                Err(e) => return Err(FfiError::config(format!("${CONFIG_ENV}: {e}"))),
            },
        };
        let parsed = parse(&text, source)?;
        let mut next = self.clone();
        for (key, value) in parsed.table {
            next.apply(&key, &value)
                .map_err(|e| FfiError::config(format!("config {}: {}", parsed.source, e)))?;
        }
        *self = next;
        Ok(())
    }

    /// Sets one key from a string value (as `strata_options_set` does).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), FfiError> {
        let mut next = self.clone();
        next.apply(key, &Value::String(value.to_string()))
            .map_err(FfiError::config)?;
        *self = next;
        Ok(())
    }

    fn apply(&mut self, key: &str, value: &Value) -> Result<(), String> {
        let o = &mut self.options;
        match key {
            "path" => self.path = Some(PathBuf::from(as_str(key, value)?)),
            "io_mode" => {
                o.io_mode = as_str(key, value)?
                    .parse()
                    .map_err(|e: strata::InvalidInput| format!("key `{key}`: {e}"))?
            }
            "io_engine" => {
                o.io_engine = as_str(key, value)?
                    .parse()
                    .map_err(|e: strata::InvalidInput| format!("key `{key}`: {e}"))?
            }
            "layer_size_bytes_max" => o.layer_size_bytes_max = as_bytes(key, value)?,
            "writer_buffer_bytes" => o.writer_buffer_bytes = as_usize(key, value)?,
            "value_size_bytes_max" => o.value_size_bytes_max = as_usize(key, value)?,
            "fallback_to_buffered" => o.fallback_to_buffered = as_bool(key, value)?,
            "alignment_bytes" => {
                o.alignment_bytes = if as_none(value) {
                    None
                } else {
                    Some(as_usize(key, value)?)
                }
            }
            "history_lsns" => {
                o.history_lsns = if as_none(value) {
                    None
                } else {
                    Some(as_bytes(key, value)?)
                }
            }
            "delta_block_bytes" => o.delta_block_bytes = as_usize(key, value)?,
            "background_flush" => o.background_flush = as_bool(key, value)?,
            "frozen_layers_max" => o.frozen_layers_max = as_usize(key, value)?,
            "create_if_missing" => o.create_if_missing = as_bool(key, value)?,
            "remote_follower" => o.remote_follower = as_bool(key, value)?,
            "remote_follow_interval_ms" => {
                o.remote_follow_interval = if as_none(value) {
                    None
                } else {
                    Some(std::time::Duration::from_millis(as_u64(key, value)?))
                }
            }
            "remote_deletion_delay_ms" => {
                o.remote_deletion_delay = std::time::Duration::from_millis(as_u64(key, value)?)
            }
            "remote_single_put_bytes_max" => o.remote_single_put_bytes_max = as_u64(key, value)?,
            "local_layer_bytes_max" => {
                o.local_layer_bytes_max = if as_none(value) {
                    None
                } else {
                    Some(as_bytes(key, value)?)
                }
            }
            "remote" => {
                o.remote = if as_none(value) {
                    None
                } else {
                    Some(
                        strata::remote::Remote::from_url(as_str(key, value)?)
                            .map_err(|e| format!("key `{key}`: {e}"))?,
                    )
                }
            }
            _ => {
                let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
                return Err(format!(
                    "unknown key `{key}`; known keys: {}",
                    known.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// The effective configuration as a JSON object (every key of [`KEYS`]).
    pub fn to_json(&self) -> Value {
        let o = &self.options;
        serde_json::json!({
            "path": self.path.as_ref().map(|p| p.display().to_string()),
            "io_mode": o.io_mode.to_string(),
            "io_engine": o.io_engine.to_string(),
            "layer_size_bytes_max": o.layer_size_bytes_max,
            "writer_buffer_bytes": o.writer_buffer_bytes,
            "value_size_bytes_max": o.value_size_bytes_max,
            "fallback_to_buffered": o.fallback_to_buffered,
            "alignment_bytes": o.alignment_bytes,
            "history_lsns": o.history_lsns,
            "delta_block_bytes": o.delta_block_bytes,
            "background_flush": o.background_flush,
            "frozen_layers_max": o.frozen_layers_max,
            "create_if_missing": o.create_if_missing,
            "remote": o.remote.as_ref().map(|r| r.0.url().to_string()),
            "local_layer_bytes_max": o.local_layer_bytes_max,
            "remote_follower": o.remote_follower,
            "remote_follow_interval_ms": o.remote_follow_interval.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            "remote_deletion_delay_ms": u64::try_from(o.remote_deletion_delay.as_millis()).unwrap_or(u64::MAX),
            "remote_single_put_bytes_max": o.remote_single_put_bytes_max,
        })
    }
}

struct Parsed {
    table: serde_json::Map<String, Value>,
    /// Where the text came from, for messages: "JSON text", "file x.toml", ...
    source: String,
}

/// Tells text from a path: text starting with `{` is JSON; text holding `=`
/// or a newline is TOML; anything else is a path to a config file, whose
/// format follows its extension (`.json`, `.toml`) or else its first byte.
fn parse(text: &str, source: Option<String>) -> Result<Parsed, FfiError> {
    let trimmed = text.trim();
    let via = |what: &str| match &source {
        Some(s) => format!("{what} in {s}"),
        None => what.to_string(),
    };
    if trimmed.is_empty() {
        return Ok(Parsed {
            table: Default::default(),
            source: via("empty text"),
        });
    }
    if trimmed.starts_with('{') {
        let src = via("JSON text");
        return Ok(Parsed {
            table: parse_json(trimmed, &src)?,
            source: src,
        });
    }
    if trimmed.contains('=') || trimmed.contains('\n') {
        let src = via("TOML text");
        return Ok(Parsed {
            table: parse_toml(trimmed, &src)?,
            source: src,
        });
    }
    let path = Path::new(trimmed);
    let src = via(&format!("file {}", path.display()));
    let body = std::fs::read_to_string(path)
        .map_err(|e| FfiError::config(format!("config {src}: cannot read: {e}")))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let json = match ext {
        "json" => true,
        "toml" => false,
        _ => body.trim_start().starts_with('{'),
    };
    let table = if json {
        parse_json(&body, &src)?
    } else {
        parse_toml(&body, &src)?
    };
    Ok(Parsed { table, source: src })
}

fn parse_json(text: &str, src: &str) -> Result<serde_json::Map<String, Value>, FfiError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(FfiError::config(format!(
            "config {src}: expected an object, found {other}"
        ))),
        Err(e) => Err(FfiError::config(format!(
            "config {src}: malformed JSON: {e}"
        ))),
    }
}

fn parse_toml(text: &str, src: &str) -> Result<serde_json::Map<String, Value>, FfiError> {
    let table: toml::Table = toml::from_str(text)
        .map_err(|e| FfiError::config(format!("config {src}: malformed TOML: {}", e.message())))?;
    match serde_json::to_value(table) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(FfiError::config(format!("config {src}: expected a table"))),
        Err(e) => Err(FfiError::config(format!("config {src}: {e}"))),
    }
}

fn as_str<'v>(key: &str, v: &'v Value) -> Result<&'v str, String> {
    v.as_str()
        .ok_or_else(|| format!("key `{key}` must be a string, found {v}"))
}

/// JSON null, or the strings "none" / "" (TOML has no null).
fn as_none(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty() || s.eq_ignore_ascii_case("none"),
        _ => false,
    }
}

fn as_bool(key: &str, v: &Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) => match s.as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(format!("key `{key}` must be true or false, found {s:?}")),
        },
        _ => Err(format!("key `{key}` must be true or false, found {v}")),
    }
}

fn as_bytes(key: &str, v: &Value) -> Result<u64, String> {
    match v {
        Value::Number(n) => n.as_u64().ok_or_else(|| format!("key `{key}` must be a non-negative integer, found {n}")),
        Value::String(s) => parse_size(s).ok_or_else(|| {
            format!("key `{key}`: {s:?} is not a size (an integer with an optional K, M, G, KiB, MiB or GiB suffix)")
        }),
        _ => Err(format!("key `{key}` must be an integer or a size string, found {v}")),
    }
}

fn as_u64(key: &str, v: &Value) -> Result<u64, String> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    n.ok_or_else(|| format!("key `{key}` must be a non-negative integer, found {v}"))
}

fn as_usize(key: &str, v: &Value) -> Result<usize, String> {
    let n = as_bytes(key, v)?;
    usize::try_from(n).map_err(|_| format!("key `{key}` = {n} does not fit this machine's usize"))
}

/// "4096", "64KiB", "64K", "1 MiB", "2G": binary multiples either way.
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let shift = match suffix.trim() {
        "" | "B" => 0,
        "K" | "k" | "KiB" | "KB" => 10,
        "M" | "MiB" | "MB" => 20,
        "G" | "GiB" | "GB" => 30,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_toml_text_set_the_same_options() {
        let mut a = Config::default();
        a.load(Some(
            r#"{"io_mode": "buffered", "writer_buffer_bytes": "64KiB", "path": "x"}"#,
        ))
        .unwrap();
        let mut b = Config::default();
        b.load(Some(
            "io_mode = \"buffered\"\nwriter_buffer_bytes = 65536\npath = \"x\"",
        ))
        .unwrap();
        assert_eq!(a.to_json(), b.to_json());
        assert_eq!(a.options.writer_buffer_bytes, 65536);
    }

    #[test]
    fn unknown_key_is_an_error_that_names_it() {
        let e = Config::default()
            .load(Some(r#"{"io_mod": "direct"}"#))
            .unwrap_err();
        assert!(e.message.contains("unknown key `io_mod`"), "{}", e.message);
        assert!(e.message.contains("io_mode"), "{}", e.message);
    }

    #[test]
    fn bad_value_is_an_error_and_applies_nothing() {
        let mut c = Config::default();
        let before = c.to_json();
        let e = c
            .load(Some(r#"{"writer_buffer_bytes": 1, "io_mode": "fast"}"#))
            .unwrap_err();
        assert!(e.message.contains("fast"), "{}", e.message);
        assert_eq!(c.to_json(), before);
    }

    #[test]
    fn malformed_text_is_an_error() {
        assert!(Config::default()
            .load(Some("{ not json"))
            .unwrap_err()
            .message
            .contains("malformed JSON"));
        assert!(Config::default()
            .load(Some("io_mode = = 1"))
            .unwrap_err()
            .message
            .contains("malformed TOML"));
    }

    #[test]
    fn a_path_is_read_by_extension() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "fallback_to_buffered = true\n").unwrap();
        let mut c = Config::default();
        c.load(Some(p.to_str().unwrap())).unwrap();
        assert!(c.options.fallback_to_buffered);
        let missing = dir.path().join("missing.json");
        let e = Config::default()
            .load(Some(missing.to_str().unwrap()))
            .unwrap_err();
        assert!(e.message.contains("cannot read"), "{}", e.message);
    }

    #[test]
    fn optional_keys_take_none() {
        let mut c = Config::default();
        c.load(Some(r#"{"alignment_bytes": 4096, "history_lsns": "1000"}"#))
            .unwrap();
        assert_eq!(c.options.alignment_bytes, Some(4096));
        assert_eq!(c.options.history_lsns, Some(1000));
        c.load(Some("alignment_bytes = \"none\"\nhistory_lsns = \"\""))
            .unwrap();
        assert_eq!(c.options.alignment_bytes, None);
        assert_eq!(c.options.history_lsns, None);
        c.set("background_flush", "false").unwrap();
        assert!(!c.options.background_flush);
    }

    #[test]
    fn the_remote_deletion_delay_is_a_key_in_milliseconds() {
        let mut c = Config::default();
        assert_eq!(
            c.to_json()["remote_deletion_delay_ms"],
            strata::REMOTE_DELETION_DELAY_DEFAULT.as_millis() as u64
        );
        c.load(Some(r#"{"remote_deletion_delay_ms": 1500}"#))
            .unwrap();
        assert_eq!(
            c.options.remote_deletion_delay,
            std::time::Duration::from_millis(1500)
        );
        c.set("remote_deletion_delay_ms", "0").unwrap();
        assert!(c.options.remote_deletion_delay.is_zero());
        for bad in ["-1", "\"soon\"", "1.5"] {
            let e = c
                .load(Some(&format!(r#"{{"remote_deletion_delay_ms": {bad}}}"#)))
                .unwrap_err();
            assert!(e.message.contains("remote_deletion_delay_ms"), "{e}");
        }
        assert!(c.options.remote_deletion_delay.is_zero());
        assert_eq!(
            c.to_json()["remote_follow_interval_ms"],
            strata::REMOTE_FOLLOW_INTERVAL_DEFAULT.as_millis() as u64
        );
        c.set("remote_follow_interval_ms", "250").unwrap();
        assert_eq!(
            c.options.remote_follow_interval,
            Some(std::time::Duration::from_millis(250))
        );
        c.set("remote_follow_interval_ms", "none").unwrap();
        assert_eq!(c.options.remote_follow_interval, None);
    }

    #[test]
    fn frozen_layers_max_is_a_key() {
        let mut c = Config::default();
        assert_eq!(
            c.to_json()["frozen_layers_max"],
            strata::Options::default().frozen_layers_max as u64
        );
        c.load(Some("frozen_layers_max = 8")).unwrap();
        assert_eq!(c.options.frozen_layers_max, 8);
        c.set("frozen_layers_max", "2").unwrap();
        assert_eq!(c.to_json()["frozen_layers_max"], 2);
        assert!(c.set("frozen_layers_max", "many").is_err());
    }

    #[test]
    fn every_key_is_in_to_json() {
        let json = Config::default().to_json();
        let obj = json.as_object().unwrap();
        for (key, _) in KEYS {
            assert!(obj.contains_key(*key), "to_json lacks `{key}`");
        }
        assert_eq!(obj.len(), KEYS.len());
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64KiB"), Some(65536));
        assert_eq!(parse_size("2 M"), Some(2 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("1T"), None);
        assert_eq!(parse_size(""), None);
    }
}
