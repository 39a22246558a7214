//! The comparison rule: every word of every buffer, bit for bit.
//!
//! No tolerance is needed, and none is given: the generator keeps every float operation exact
//! (see [`crate::emit`]), so the ulp bound is 0. A device that differs in one bit of one word
//! disagrees.

use crate::emit::BufferRole;
use crate::run::Outcome;
use serde::Serialize;

/// Words shown of each differing buffer.
const SHOWN: usize = 8;

/// One buffer that differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub buffer: String,
    /// Words that differ.
    pub differing_words: usize,
    /// Words in the buffer (the oracle's).
    pub words: usize,
    /// The first few: word index, the oracle's value, the device's.
    pub first: Vec<WordDifference>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WordDifference {
    pub index: usize,
    /// For the output buffer: the invocation and slot the word belongs to.
    pub invocation: Option<usize>,
    pub slot: Option<usize>,
    pub expected: u32,
    pub actual: u32,
}

fn words(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes.chunks(4).map(|chunk| {
        chunk
            .iter()
            .rev()
            .fold(0u32, |word, byte| (word << 8) | u32::from(*byte))
    })
}

/// Where `actual` differs from `expected`, buffer by buffer; empty when they agree. A buffer
/// of another length differs in every word past the shorter one.
pub fn compare(roles: &[BufferRole], slots: u32, expected: &[Vec<u8>], actual: &[Vec<u8>]) -> Vec<Difference> {
    let mut differences = Vec::new();
    for (position, want) in expected.iter().enumerate() {
        let role = roles.get(position).copied();
        let name = role.map_or_else(|| format!("buffer {position}"), |r| r.name().to_owned());
        let got = actual.get(position).map(Vec::as_slice).unwrap_or(&[]);
        let want_words: Vec<u32> = words(want).collect();
        let got_words: Vec<u32> = words(got).collect();
        let length = want_words.len().max(got_words.len());
        let mut first = Vec::new();
        let mut differing = 0;
        for index in 0..length {
            let (w, g) = (want_words.get(index), got_words.get(index));
            if w == g {
                continue;
            }
            differing += 1;
            if first.len() < SHOWN {
                let per_invocation = (role == Some(BufferRole::Output) && slots > 0).then_some(slots as usize);
                first.push(WordDifference {
                    index,
                    invocation: per_invocation.map(|s| index / s),
                    slot: per_invocation.map(|s| index % s),
                    expected: w.copied().unwrap_or(0),
                    actual: g.copied().unwrap_or(0),
                });
            }
        }
        if differing > 0 {
            differences.push(Difference {
                buffer: name,
                differing_words: differing,
                words: want_words.len(),
                first,
            });
        }
    }
    differences
}

/// One line per differing word: `out[37] (invocation 2, slot 5): expected 0x... got 0x...`.
pub fn describe(differences: &[Difference]) -> String {
    let mut text = String::new();
    for difference in differences {
        text.push_str(&format!(
            "{}: {} of {} words differ\n",
            difference.buffer, difference.differing_words, difference.words
        ));
        for word in &difference.first {
            let place = match (word.invocation, word.slot) {
                (Some(invocation), Some(slot)) => format!(" (invocation {invocation}, slot {slot})"),
                _ => String::new(),
            };
            text.push_str(&format!(
                "  {}[{}]{place}: oracle {:#010x} ({}), device {:#010x} ({})\n",
                difference.buffer, word.index, word.expected, word.expected as i32, word.actual, word.actual as i32
            ));
        }
    }
    text
}

/// What one device's outcome means, next to the oracle's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Agrees,
    /// Not a finding: the device says it does not support the kernel.
    Refused {
        message: String,
    },
    Differs {
        differences: Vec<Difference>,
    },
    Failed {
        stage: String,
        kind: String,
        message: String,
    },
    Crashed {
        message: String,
    },
    Hung {
        seconds: u64,
    },
}

impl Verdict {
    pub fn is_finding(&self) -> bool {
        !matches!(self, Verdict::Agrees | Verdict::Refused { .. })
    }

    /// What a shrunk program must still show to count as the same finding.
    pub fn same_kind(&self, other: &Verdict) -> bool {
        match (self, other) {
            (Verdict::Differs { .. }, Verdict::Differs { .. }) => true,
            (
                Verdict::Failed { stage, kind, .. },
                Verdict::Failed {
                    stage: other_stage,
                    kind: other_kind,
                    ..
                },
            ) => stage == other_stage && kind == other_kind,
            (Verdict::Crashed { .. }, Verdict::Crashed { .. }) => true,
            (Verdict::Hung { .. }, Verdict::Hung { .. }) => true,
            _ => false,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Refused { .. } => "refused",
            Verdict::Differs { .. } => "mismatch",
            Verdict::Failed { .. } => "failed",
            Verdict::Crashed { .. } => "crash",
            Verdict::Hung { .. } => "hang",
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Verdict::Agrees => "agrees with the oracle\n".to_owned(),
            Verdict::Refused { message } => format!("refused: {message}\n"),
            Verdict::Differs { differences } => describe(differences),
            Verdict::Failed { stage, kind, message } => format!("failed at {stage} ({kind}): {message}\n"),
            Verdict::Crashed { message } => format!("crashed: {message}\n"),
            Verdict::Hung { seconds } => format!("no answer within {seconds} s\n"),
        }
    }
}

/// Judges a device's outcome against the oracle's, which ran.
pub fn judge(roles: &[BufferRole], slots: u32, oracle: &[Vec<u8>], device: &Outcome) -> Verdict {
    match device {
        Outcome::Ran { buffers } => {
            let differences = compare(roles, slots, oracle, buffers);
            if differences.is_empty() {
                Verdict::Agrees
            } else {
                Verdict::Differs { differences }
            }
        }
        Outcome::Refused { message } => Verdict::Refused {
            message: message.clone(),
        },
        Outcome::Failed { stage, kind, message } => Verdict::Failed {
            stage: stage.clone(),
            kind: kind.clone(),
            message: message.clone(),
        },
        Outcome::Crashed { message } => Verdict::Crashed {
            message: message.clone(),
        },
        Outcome::Hung { seconds } => Verdict::Hung { seconds: *seconds },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u32]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn equal_buffers_agree() {
        let a = vec![bytes(&[1, 2, 3]), bytes(&[9])];
        assert!(compare(&[BufferRole::Output, BufferRole::Atomics], 3, &a, &a.clone()).is_empty());
    }

    #[test]
    fn one_flipped_bit_is_a_difference() {
        let expected = vec![bytes(&[1, 2, 3, 4, 5, 6])];
        let actual = vec![bytes(&[1, 2, 3, 4, 5 ^ 0x8000_0000, 6])];
        let differences = compare(&[BufferRole::Output], 2, &expected, &actual);
        assert_eq!(differences.len(), 1);
        let word = &differences[0].first[0];
        assert_eq!((word.index, word.invocation, word.slot), (4, Some(2), Some(0)));
        assert_eq!((word.expected, word.actual), (5, 0x8000_0005));
        assert!(describe(&differences).contains("out[4] (invocation 2, slot 0)"));
    }

    #[test]
    fn negative_zero_is_not_positive_zero() {
        // The emitter canonicalises zeros; the comparator itself must not.
        let expected = vec![bytes(&[0.0f32.to_bits()])];
        let actual = vec![bytes(&[(-0.0f32).to_bits()])];
        assert_eq!(compare(&[BufferRole::Output], 1, &expected, &actual).len(), 1);
    }

    #[test]
    fn a_short_buffer_differs() {
        let expected = vec![bytes(&[1, 2, 3])];
        let actual = vec![bytes(&[1, 2])];
        let differences = compare(&[BufferRole::Atomics], 0, &expected, &actual);
        assert_eq!(differences[0].differing_words, 1);
    }
}
