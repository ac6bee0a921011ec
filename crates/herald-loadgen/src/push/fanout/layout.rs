//! Who listens to what, and where each message goes: the subjects, each
//! subscriber's literal subjects and pattern, and the publisher's choice of
//! subject for every message (in turn, or drawn from a seeded
//! distribution, seed 004 chapter 5).
//!
//! The draws are seeded, so a generator replays them to learn how many
//! messages each subject got ([`Layout::published_counts`]) instead of the
//! publisher sending it a million counts.
//!
//! Subjects are named in two tokens below a root (`fanout.G.M`, subject
//! `G * GROUP + M`), so that one pattern (`fanout.G.*`) names a group of
//! [`GROUP`] subjects on every broker.

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use rand_distr::{Distribution as _, Normal, Poisson, Zipf};
use serde::{Deserialize, Serialize};

use super::super::PushBenchError;

/// Subjects one pattern names.
pub const GROUP: u32 = 100;

/// How the publisher picks each message's subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum Choice {
    /// Message `i` goes to subject `i % subjects`.
    #[default]
    InTurn,
    /// Every subject equally likely.
    Uniform,
    /// Normal around the middle subject, standard deviation an eighth of
    /// the subjects (clamped to the range).
    Normal,
    /// Poisson with mean half the subjects: a narrow band of the middle
    /// subjects (standard deviation √(subjects/2)) takes everything.
    Poisson,
    /// Zipf with exponent 1 over the subjects' ranks: subject 0 is the
    /// most published, subject `k` about `1/(k+1)` as often.
    Zipf,
}

impl Choice {
    /// The name rows carry.
    pub fn name(self) -> &'static str {
        match self {
            Choice::InTurn => "in-turn",
            Choice::Uniform => "uniform",
            Choice::Normal => "normal",
            Choice::Poisson => "poisson",
            Choice::Zipf => "zipf",
        }
    }
}

/// The subjects, the subscriptions and the publisher's choice.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Layout {
    /// Subjects, numbered from 0.
    pub subjects: u32,
    /// Subscribers (connections), numbered from 0.
    pub subscribers: u64,
    /// Literal subjects each subscriber listens to.
    pub per_subscriber: u32,
    /// Each subscriber also listens to one pattern (a [`GROUP`] of
    /// subjects none of its literal subjects are in).
    pub patterns: bool,
    /// The publisher's choice of subject.
    pub choice: Choice,
    /// Seeds the draws.
    pub seed: u64,
}

/// What one subscriber listens to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interest {
    /// Its literal subjects, ascending, without repeats.
    pub subjects: Vec<u32>,
    /// The group its pattern names, if it has one.
    pub group: Option<u32>,
}

impl Interest {
    /// Every subject it receives, ascending: its literal subjects and its
    /// pattern's group.
    pub fn covered(&self, subjects: u32) -> Vec<u32> {
        let mut covered = self.subjects.clone();
        if let Some(group) = self.group {
            let first = group.saturating_mul(GROUP);
            covered.extend(first..first.saturating_add(GROUP).min(subjects));
        }
        covered.sort_unstable();
        covered.dedup();
        covered
    }
}

impl Layout {
    /// One subscriber to each of `subjects` in turn, messages in turn:
    /// seed 002's shape.
    pub fn in_turn(subjects: u32, subscribers: u64) -> Self {
        Self {
            subjects,
            subscribers,
            per_subscriber: 1,
            patterns: false,
            choice: Choice::InTurn,
            seed: 0,
        }
    }

    /// Subscriptions over all subscribers, patterns included.
    pub fn subscriptions(&self) -> u64 {
        self.subscribers * (u64::from(self.per_subscriber.max(1)) + u64::from(self.patterns))
    }

    fn groups(&self) -> u32 {
        self.subjects.max(1).div_ceil(GROUP)
    }

    /// What subscriber `subscriber` listens to. Literal subscriptions,
    /// numbered across subscribers, take the subjects in turn when there
    /// are more of them than subjects, and are spread evenly over the
    /// subjects when there are fewer (subscription `j` of `J` to subject
    /// `j * (subjects / J)`). A pattern takes the group after the one its
    /// last literal subject is in, and its literal subjects inside that
    /// group are dropped, so that each subject reaches a subscriber once.
    pub fn interest(&self, subscriber: u64) -> Interest {
        let per = u64::from(self.per_subscriber.max(1));
        let subjects = u64::from(self.subjects.max(1));
        let total = self.subscribers.max(1) * per;
        let spread = (subjects / total).max(1);
        let mut literal: Vec<u32> = (0..per)
            .map(|k| (((subscriber * per + k) * spread) % subjects) as u32)
            .collect();
        literal.sort_unstable();
        literal.dedup();
        let group = self.patterns.then(|| {
            let last = literal.last().copied().unwrap_or(0);
            (last / GROUP + 1) % self.groups()
        });
        if let Some(group) = group {
            literal.retain(|s| s / GROUP != group);
        }
        Interest {
            subjects: literal,
            group,
        }
    }

    /// The publisher's subjects, message by message.
    pub fn draws(&self) -> Result<Draws, PushBenchError> {
        let subjects = self.subjects.max(1);
        let n = f64::from(subjects);
        let bad = |e: String| PushBenchError::Refused(format!("the {:?} choice: {e}", self.choice));
        let sampler = match self.choice {
            Choice::InTurn => Sampler::InTurn,
            Choice::Uniform => Sampler::Uniform,
            Choice::Normal => {
                Sampler::Normal(Normal::new(n / 2.0, n / 8.0).map_err(|e| bad(e.to_string()))?)
            }
            Choice::Poisson => {
                Sampler::Poisson(Poisson::new(n / 2.0).map_err(|e| bad(e.to_string()))?)
            }
            Choice::Zipf => Sampler::Zipf(Zipf::new(n, 1.0).map_err(|e| bad(e.to_string()))?),
        };
        Ok(Draws {
            rng: StdRng::seed_from_u64(self.seed),
            sampler,
            subjects,
            next: 0,
        })
    }

    /// How many of the first `messages` went to each subject (indexed by
    /// subject).
    pub fn published_counts(&self, messages: u64) -> Result<Vec<u64>, PushBenchError> {
        let subjects = self.subjects.max(1);
        let mut counts = vec![0u64; subjects as usize];
        if self.choice == Choice::InTurn {
            let n = u64::from(subjects);
            for (subject, count) in counts.iter_mut().enumerate() {
                *count = messages / n + u64::from((subject as u64) < messages % n);
            }
            return Ok(counts);
        }
        for subject in self.draws()?.take(messages as usize) {
            if let Some(count) = counts.get_mut(subject as usize) {
                *count += 1;
            }
        }
        Ok(counts)
    }
}

enum Sampler {
    InTurn,
    Uniform,
    Normal(Normal<f64>),
    Poisson(Poisson<f64>),
    Zipf(Zipf<f64>),
}

/// The subject of each message in turn; endless.
pub struct Draws {
    rng: StdRng,
    sampler: Sampler,
    subjects: u32,
    next: u64,
}

impl Iterator for Draws {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let last = f64::from(self.subjects - 1);
        let clamp = |x: f64| x.round().clamp(0.0, last) as u32;
        let subject = match &self.sampler {
            Sampler::InTurn => (self.next % u64::from(self.subjects)) as u32,
            Sampler::Uniform => self.rng.random_range(0..self.subjects),
            Sampler::Normal(d) => clamp(d.sample(&mut self.rng)),
            Sampler::Poisson(d) => clamp(d.sample(&mut self.rng)),
            // Ranks run from 1.
            Sampler::Zipf(d) => clamp(d.sample(&mut self.rng) - 1.0),
        };
        self.next += 1;
        Some(subject)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(subjects: u32, subscribers: u64, per: u32, patterns: bool, choice: Choice) -> Layout {
        Layout {
            subjects,
            subscribers,
            per_subscriber: per,
            patterns,
            choice,
            seed: 7,
        }
    }

    #[test]
    fn seed_002s_shape_is_one_subject_per_subscriber_in_turn() {
        let l = Layout::in_turn(2, 5);
        let subjects: Vec<Vec<u32>> = (0..5).map(|n| l.interest(n).subjects).collect();
        assert_eq!(subjects, [[0], [1], [0], [1], [0]]);
        assert_eq!(l.published_counts(5).unwrap(), [3, 2]);
        assert_eq!(
            l.draws().unwrap().take(5).collect::<Vec<_>>(),
            [0, 1, 0, 1, 0]
        );
        assert_eq!(l.subscriptions(), 5);
    }

    #[test]
    fn fewer_subscriptions_than_subjects_spread_evenly_and_patterns_avoid_them() {
        // S3's shape, scaled down: 10,000 subjects, 100 subscribers of 10.
        let l = layout(10_000, 100, 10, true, Choice::Uniform);
        let first = l.interest(0);
        assert_eq!(first.subjects, (0..10).map(|k| k * 10).collect::<Vec<_>>());
        assert_eq!(first.group, Some(1), "the group after subjects 0..=90");
        let last = l.interest(99);
        assert_eq!(last.subjects[0], 9_900);
        assert_eq!(last.group, Some(0), "wraps round");
        assert_eq!(l.subscriptions(), 1_100);
        let covered = first.covered(l.subjects);
        assert_eq!(covered.len(), 110);
        assert!(covered.contains(&100) && covered.contains(&199));
    }

    #[test]
    fn draws_are_seeded_in_range_and_shaped() {
        for choice in [
            Choice::Uniform,
            Choice::Normal,
            Choice::Poisson,
            Choice::Zipf,
        ] {
            let l = layout(1_000_000, 1, 1, false, choice);
            let a: Vec<u32> = l.draws().unwrap().take(20_000).collect();
            let b: Vec<u32> = l.draws().unwrap().take(20_000).collect();
            assert_eq!(a, b, "{choice:?} replays");
            assert!(a.iter().all(|&s| s < 1_000_000), "{choice:?}");
            let counts = l.published_counts(20_000).unwrap();
            assert_eq!(counts.iter().sum::<u64>(), 20_000);
            let distinct = counts.iter().filter(|&&c| c > 0).count();
            match choice {
                // 20,000 draws over a million subjects rarely repeat.
                Choice::Uniform | Choice::Normal => assert!(distinct > 19_000, "{choice:?}"),
                // A band of a few thousand subjects.
                Choice::Poisson => assert!(distinct < 6_000, "{distinct}"),
                // The head takes a large share: 1/H(1e6) ≈ 7% for rank 1.
                Choice::Zipf => assert!(counts[0] > 1_000, "{}", counts[0]),
                Choice::InTurn => {}
            }
        }
    }
}
