//! Interleaved setups for the flow-control evaluation: one broker run
//! switches its flow control (the admin API's `/v1/flow-control`) between
//! setups every slice, in turn, so that setups are compared under the same
//! broker, the same files and the same minutes of the machine. Between
//! separate runs of one setup this machine's goodput spreads by about 12%,
//! much of it the run itself (docs/flow-control.md, third pass).
//!
//! A controller resumes each of its slices from the limit it had reached
//! at the end of its previous one (its history of windows starts afresh),
//! so that it does not climb from its first limit in every slice.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::LoadError;

/// One setup: a flow-control mode and its (first) limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setup {
    /// `off`, `fixed`, `last-three-points`, `adaptive` or `gradient`.
    pub mode: String,
    /// The fixed limit or a controller's first (none: off).
    pub limit: Option<u32>,
}

impl Setup {
    /// Parses `MODE` or `MODE:LIMIT` (`fixed:1024`, `adaptive:100`, `off`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (mode, limit) = match text.split_once(':') {
            Some((mode, limit)) => {
                let limit: u32 = limit
                    .parse()
                    .map_err(|_| format!("setup {text}: the limit is not a number"))?;
                (mode, Some(limit))
            }
            None => (text, None),
        };
        if mode.is_empty() {
            return Err(format!("setup {text}: expected MODE or MODE:LIMIT"));
        }
        if mode != "off" && limit.is_none() {
            return Err(format!("setup {text}: {mode} needs a limit (MODE:LIMIT)"));
        }
        Ok(Self {
            mode: mode.to_owned(),
            limit: if mode == "off" { None } else { limit },
        })
    }

    /// How points name it: `fixed:1024`, `off`.
    pub fn name(&self) -> String {
        match self.limit {
            Some(limit) => format!("{}:{limit}", self.mode),
            None => self.mode.clone(),
        }
    }

    /// Whether a controller moves its limit (and so resumes from where it
    /// left off).
    pub fn moves(&self) -> bool {
        !matches!(self.mode.as_str(), "off" | "fixed")
    }
}

/// The setups taken in turn, and for how long each.
#[derive(Debug, Clone)]
pub struct Interleave {
    /// In the order they take turns.
    pub setups: Vec<Setup>,
    /// How long each turn lasts.
    pub slice: Duration,
}

/// Where the schedule is: which setup holds the broker, and the limit each
/// controller resumes from.
#[derive(Debug, Clone)]
pub struct Schedule {
    interleave: Interleave,
    resume: Vec<Option<u32>>,
    turn: usize,
}

impl Schedule {
    /// At the start of the first turn.
    pub fn new(interleave: Interleave) -> Self {
        let resume = interleave.setups.iter().map(|s| s.limit).collect();
        Self {
            interleave,
            resume,
            turn: 0,
        }
    }

    /// The index of the setup whose turn `turn` is.
    pub fn setup_of(&self, turn: usize) -> usize {
        turn % self.interleave.setups.len().max(1)
    }

    /// Ends the current turn, its setup's limit at the end being
    /// `reached` (kept for a controller's next turn), and answers the next
    /// turn's setup with the limit to start it at.
    pub fn next(&mut self, reached: Option<u32>) -> (Setup, Option<u32>) {
        let current = self.setup_of(self.turn);
        if self.interleave.setups[current].moves() && reached.is_some() {
            self.resume[current] = reached;
        }
        self.turn += 1;
        self.current()
    }

    /// The setup whose turn it is, with the limit to start it at.
    pub fn current(&self) -> (Setup, Option<u32>) {
        let index = self.setup_of(self.turn);
        (self.interleave.setups[index].clone(), self.resume[index])
    }

    /// How long each turn lasts.
    pub fn slice(&self) -> Duration {
        self.interleave.slice
    }
}

/// The gate as `/v1/flow-control` answers it (the fields used here).
#[derive(Debug, Clone, Deserialize)]
pub struct GateView {
    /// Its mode.
    pub mode: String,
    /// The limit in force (none: off).
    pub limit: Option<u32>,
}

/// Reads the gate.
pub async fn read_gate(admin: SocketAddr) -> Result<GateView, LoadError> {
    call(admin, "GET", None, "reading the flow control").await
}

/// Switches the gate to `setup` starting at `limit`.
pub async fn switch_gate(
    admin: SocketAddr,
    setup: &Setup,
    limit: Option<u32>,
) -> Result<GateView, LoadError> {
    let body = match limit {
        Some(limit) => serde_json::json!({ "mode": setup.mode, "limit": limit }),
        None => serde_json::json!({ "mode": setup.mode }),
    };
    call(
        admin,
        "PUT",
        Some(body.to_string()),
        "switching the flow control",
    )
    .await
}

/// Tries a call up to three times: a lost connection or a slow answer
/// would otherwise end the whole run (a refusal is not retried).
async fn call(
    admin: SocketAddr,
    method: &str,
    body: Option<String>,
    what: &'static str,
) -> Result<GateView, LoadError> {
    let mut attempt = 1;
    loop {
        match call_once(admin, method, body.clone(), what).await {
            Err(LoadError::Io { .. } | LoadError::Timeout { .. }) if attempt < 3 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            outcome => return outcome,
        }
    }
}

async fn call_once(
    admin: SocketAddr,
    method: &str,
    body: Option<String>,
    what: &'static str,
) -> Result<GateView, LoadError> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(admin).await?;
        let body = body.unwrap_or_default();
        let request = format!(
            "{method} /v1/flow-control HTTP/1.0\r\nHost: herald\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok::<String, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| LoadError::Timeout {
            what,
            timeout_ms: 5_000,
        })?
        .map_err(|source| LoadError::io(what, source))?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(LoadError::Admin {
            what,
            detail: format!("{status}: {}", body.trim()),
        });
    }
    serde_json::from_str(body).map_err(|e| LoadError::Admin {
        what,
        detail: format!("not the gate's JSON ({e}): {}", body.trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setups(names: &[&str]) -> Interleave {
        Interleave {
            setups: names
                .iter()
                .map(|n| Setup::parse(n).expect("setup"))
                .collect(),
            slice: Duration::from_secs(5),
        }
    }

    #[test]
    fn setups_parse_with_and_without_a_limit() {
        assert_eq!(
            Setup::parse("fixed:1024"),
            Ok(Setup {
                mode: "fixed".into(),
                limit: Some(1024)
            })
        );
        assert_eq!(Setup::parse("off").map(|s| s.name()), Ok("off".into()));
        assert!(
            Setup::parse("adaptive").is_err(),
            "a controller needs a first limit"
        );
        assert!(Setup::parse("fixed:many").is_err());
        assert!(Setup::parse(":5").is_err());
    }

    #[test]
    fn turns_go_round_and_a_controller_resumes_where_it_stopped() {
        let mut schedule = Schedule::new(setups(&["fixed:1024", "adaptive:100", "off"]));
        assert_eq!(schedule.current().0.name(), "fixed:1024");
        // The fixed limit's turn ends: nothing to keep.
        let (setup, limit) = schedule.next(Some(1024));
        assert_eq!((setup.name().as_str(), limit), ("adaptive:100", Some(100)));
        // The controller reached 1,900 by the end of its turn.
        let (setup, limit) = schedule.next(Some(1_900));
        assert_eq!((setup.name().as_str(), limit), ("off", None));
        let (setup, limit) = schedule.next(None);
        assert_eq!((setup.name().as_str(), limit), ("fixed:1024", Some(1024)));
        let (setup, limit) = schedule.next(Some(1024));
        assert_eq!(
            (setup.name().as_str(), limit),
            ("adaptive:100", Some(1_900))
        );
        // A turn whose end could not be read keeps the last limit known.
        let _ = schedule.next(None);
        let _ = schedule.next(None);
        let _ = schedule.next(None);
        assert_eq!(schedule.current().1, Some(1_900));
    }
}
