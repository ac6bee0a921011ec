//! Interleaved setups for the flow-control evaluation: one broker run
//! switches its flow control (the admin API's `/v1/flow-control`) between
//! setups every slice, in turn, so that setups are compared under the same
//! broker, the same files and the same minutes of the machine. Between
//! separate runs of one setup this machine's goodput spreads by about 12%,
//! much of it the run itself (docs/flow-control.md, third pass).
//!
//! Each cycle gives every setup one turn, in the order of a row of a
//! Williams square (each setup follows every other equally often over the
//! rows), so that what a setup leaves behind (a backlog, a cold cache)
//! does not always fall on the same next one. A controller carries on in
//! each of its turns where its previous one ended, limit and history of
//! windows (the admin API's `resume`), as if it had run all along; its
//! limit is sent too, for a broker that no longer has it.

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

/// Checks that `setups` can be told apart: no name twice (their points
/// would merge), and no controller's mode twice (the broker keeps one
/// controller of each mode to resume, so two would take over each
/// other's).
pub fn distinct(setups: &[Setup]) -> Result<(), String> {
    for (i, setup) in setups.iter().enumerate() {
        for earlier in &setups[..i] {
            if earlier.name() == setup.name() {
                return Err(format!("setup {} is given twice", setup.name()));
            }
            if setup.moves() && earlier.mode == setup.mode {
                return Err(format!(
                    "{} and {}: one controller of each mode (the broker resumes one per mode)",
                    earlier.name(),
                    setup.name()
                ));
            }
        }
    }
    Ok(())
}

/// The setups taken in turn, and for how long each.
#[derive(Debug, Clone)]
pub struct Interleave {
    /// In the order they take turns.
    pub setups: Vec<Setup>,
    /// How long each turn lasts.
    pub slice: Duration,
}

/// The orders of a Williams square on `n` setups: `n` rows when `n` is
/// even, `2n` when odd (the rows and their reverses); over all the rows
/// every setup comes in every position, and right after every other,
/// equally often (a run should take a whole number of squares). Across
/// the boundary between two rows one setup may follow itself (for 3
/// setups it does once).
pub fn williams_orders(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return Vec::new();
    }
    // 0, 1, n-1, 2, n-2, ...: successive differences take every value
    // once, so its shifts give each ordered pair once.
    let mut first = Vec::with_capacity(n);
    first.push(0);
    let (mut low, mut high) = (1, n);
    for j in 1..n {
        if j % 2 == 1 {
            first.push(low);
            low += 1;
        } else {
            high -= 1;
            first.push(high);
        }
    }
    let mut rows: Vec<Vec<usize>> = (0..n)
        .map(|shift| first.iter().map(|s| (s + shift) % n).collect())
        .collect();
    if n % 2 == 1 {
        let reversed: Vec<Vec<usize>> = rows
            .iter()
            .map(|row| row.iter().rev().copied().collect())
            .collect();
        rows.extend(reversed);
    }
    rows
}

/// One turn: which setup, how to switch to it, and where it falls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The setup holding the broker.
    pub setup: Setup,
    /// The limit to send: a controller's first, or where it last was.
    pub limit: Option<u32>,
    /// Whether a controller that has had a turn carries on from it.
    pub resume: bool,
    /// Counted from 0 over the run.
    pub index: usize,
    /// The cycle it belongs to (every setup has one turn per cycle).
    pub cycle: usize,
}

/// Where the schedule is: which setup holds the broker, and the limit each
/// controller resumes from.
#[derive(Debug, Clone)]
pub struct Schedule {
    interleave: Interleave,
    orders: Vec<Vec<usize>>,
    resume: Vec<Option<u32>>,
    had_turn: Vec<bool>,
    turn: usize,
}

impl Schedule {
    /// At the start of the first turn.
    pub fn new(interleave: Interleave) -> Self {
        let resume = interleave.setups.iter().map(|s| s.limit).collect();
        let had_turn = vec![false; interleave.setups.len()];
        let orders = williams_orders(interleave.setups.len());
        Self {
            interleave,
            orders,
            resume,
            had_turn,
            turn: 0,
        }
    }

    /// The index of the setup whose turn `turn` is.
    pub fn setup_of(&self, turn: usize) -> usize {
        let n = self.interleave.setups.len().max(1);
        if self.orders.is_empty() {
            return 0;
        }
        self.orders[(turn / n) % self.orders.len()][turn % n]
    }

    /// Ends the current turn, its setup's limit at the end being
    /// `reached` (kept for a controller's next turn), and answers the
    /// next turn.
    pub fn next(&mut self, reached: Option<u32>) -> Turn {
        let current = self.setup_of(self.turn);
        if let Some(had) = self.had_turn.get_mut(current) {
            *had = true;
        }
        if self.interleave.setups[current].moves() && reached.is_some() {
            self.resume[current] = reached;
        }
        self.turn += 1;
        self.current()
    }

    /// The turn under way.
    pub fn current(&self) -> Turn {
        let index = self.setup_of(self.turn);
        let setup = self.interleave.setups[index].clone();
        Turn {
            resume: setup.moves() && self.had_turn[index],
            setup,
            limit: self.resume[index],
            index: self.turn,
            cycle: self.turn / self.interleave.setups.len().max(1),
        }
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

/// Switches the gate to `turn`'s setup.
pub async fn switch_gate(admin: SocketAddr, turn: &Turn) -> Result<GateView, LoadError> {
    let mut body = serde_json::json!({ "mode": turn.setup.mode });
    if let Some(limit) = turn.limit {
        body["limit"] = limit.into();
    }
    if turn.resume {
        body["resume"] = true.into();
    }
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
    fn setups_that_could_not_be_told_apart_are_refused() {
        let parse = |names: &[&str]| -> Vec<Setup> {
            names
                .iter()
                .map(|n| Setup::parse(n).expect("setup"))
                .collect()
        };
        assert_eq!(
            distinct(&parse(&["off", "fixed:512", "fixed:1024", "adaptive:100"])),
            Ok(())
        );
        assert!(distinct(&parse(&["fixed:512", "off", "fixed:512"]))
            .expect_err("twice")
            .contains("fixed:512 is given twice"));
        assert!(distinct(&parse(&["adaptive:100", "adaptive:1000"]))
            .expect_err("one per mode")
            .contains("one controller of each mode"));
    }

    #[test]
    fn williams_rows_put_every_setup_after_every_other_equally_often() {
        for n in 1..=7 {
            let rows = williams_orders(n);
            assert_eq!(rows.len(), if n % 2 == 0 { n } else { 2 * n });
            let mut follows = std::collections::HashMap::new();
            let mut positions = std::collections::HashMap::new();
            for row in &rows {
                let mut sorted = row.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "a permutation");
                for (position, setup) in row.iter().enumerate() {
                    *positions.entry((position, *setup)).or_insert(0) += 1;
                }
                for pair in row.windows(2) {
                    *follows.entry((pair[0], pair[1])).or_insert(0) += 1;
                }
            }
            let each = rows.len() / n;
            assert!(positions.values().all(|&c| c == each), "n={n}: positions");
            if n > 1 {
                assert_eq!(follows.len(), n * (n - 1), "n={n}: every ordered pair");
                let per_pair = if n % 2 == 0 { 1 } else { 2 };
                assert!(
                    follows.values().all(|&c| c == per_pair),
                    "n={n}: {follows:?}"
                );
            }
        }
    }

    #[test]
    fn turns_go_round_in_williams_rows_and_a_controller_resumes_where_it_stopped() {
        let mut schedule = Schedule::new(setups(&["fixed:1024", "adaptive:100", "off"]));
        // Rows for three: 0 1 2, 1 2 0, 2 0 1, then their reverses.
        let first = schedule.current();
        assert_eq!(
            (first.setup.name().as_str(), first.index, first.cycle),
            ("fixed:1024", 0, 0)
        );
        // The fixed limit's turn ends: nothing to keep.
        let turn = schedule.next(Some(1024));
        assert_eq!(
            (turn.setup.name().as_str(), turn.limit, turn.resume),
            ("adaptive:100", Some(100), false),
            "a controller's first turn starts afresh"
        );
        // The controller reached 1,900 by the end of its turn.
        let turn = schedule.next(Some(1_900));
        assert_eq!((turn.setup.name().as_str(), turn.limit), ("off", None));
        // The second cycle takes the second row: 1 2 0.
        let turn = schedule.next(None);
        assert_eq!(
            (turn.setup.name().as_str(), turn.limit, turn.resume),
            ("adaptive:100", Some(1_900), true)
        );
        assert_eq!((turn.index, turn.cycle), (3, 1));
        // A turn whose end could not be read keeps the last limit known.
        let turn = schedule.next(None);
        assert_eq!(turn.setup.name(), "off");
        let turn = schedule.next(None);
        assert_eq!(
            (turn.setup.name().as_str(), turn.resume),
            ("fixed:1024", false)
        );
        let turn = schedule.next(Some(1024));
        assert_eq!(turn.cycle, 2);
        assert_eq!(turn.setup.name(), "off");
        let turn = schedule.next(None);
        assert_eq!(
            (turn.setup.name().as_str(), turn.limit),
            ("fixed:1024", Some(1024))
        );
        let turn = schedule.next(Some(1024));
        assert_eq!(
            (turn.setup.name().as_str(), turn.limit),
            ("adaptive:100", Some(1_900))
        );
    }
}
