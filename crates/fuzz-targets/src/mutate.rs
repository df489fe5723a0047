//! A mutation fuzzer on the stable toolchain, for CI: libFuzzer needs nightly flags and an
//! instrumented build of every dependency, too long for CI's budget. This one has no coverage
//! feedback; it derives inputs from the committed corpus (which libFuzzer's coverage-guided runs
//! built, so it already reaches deep into each decoder) with libFuzzer's kinds of mutation,
//! stacked, plus tokens of the formats under test, and stops after a number of inputs, not a
//! time, so a run costs the same on any machine.
//!
//! A seed makes a run reproducible: the same seed, corpus and count give the same inputs.

use std::panic::AssertUnwindSafe;

/// Tokens of the formats the targets decode, spliced in whole: random bytes rarely spell them.
const TOKENS: &[&[u8]] = &[
    b"data: ",
    b"data:",
    b"event: ",
    b"id: ",
    b"retry: ",
    b": ",
    b"\n\n",
    b"\r\n",
    b"\r",
    b"\n",
    b"[DONE]",
    b"{\"",
    b"\":",
    b"\",\"",
    b"{}",
    b"[]",
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"-9223372036854775809",
    b"\\u0000",
    b"\\ud800",
    b"\\\"",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\0",
    b"%2e%2e",
    b"%2F",
    b"%00",
    b"../",
    b"/",
    b"?",
    b"#",
    b"&",
    b"=",
    b"state=",
    b"code=",
    b"error=",
    b"/callback",
    b"\"code\":",
    b"\"msg\":",
    b"\"data\":",
    b"\"type\":",
    b"\"text\":",
    b"\"choices\":",
    b"\"delta\":",
    b"\"tool_calls\":",
    b"\"arguments\":",
    b"\"index\":",
    b"\"finish_reason\":",
    b"\"usage\":",
    b"\"content_block_start\"",
    b"\"content_block_delta\"",
    b"\"content_block_stop\"",
    b"\"message_start\"",
    b"\"message_delta\"",
    b"\"message_stop\"",
    b"\"input_json_delta\"",
    b"\"partial_json\":",
    b"\"candidates\":",
    b"\"functionCall\":",
    b"\"parts\":",
    b"\"port\":",
    b"\"app_id\":",
    b"\"preset\":",
    b"cli_",
    b"ou_",
    b"oc_",
    b"om_",
];

/// Bytes that sit on the edges of the formats' rules.
const INTERESTING: &[u8] = &[
    0, 1, 0x7f, 0x80, 0xff, b'\n', b'\r', b':', b'"', b'\\', b'{', b'}', b'[', b']', b',', b' ',
    b'%', b'/', b'.', b'?', b'#', b'=', b'&',
];

/// Inputs grow no larger than this: the decoders' limits are tested by their own tests, and
/// large inputs only make a run slower.
pub const MAX_LEN: usize = 4096;

/// One mutation of `input`, in place; `corpus` supplies the other half of a splice.
fn mutate_once(rng: &mut fastrand::Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>]) {
    let len = input.len();
    match rng.u8(0..10) {
        // Flip one bit.
        0 if len > 0 => {
            let at = rng.usize(..len);
            input[at] ^= 1 << rng.u8(0..8);
        }
        // Any byte, or one on an edge of the formats.
        1 if len > 0 => {
            let at = rng.usize(..len);
            input[at] = if rng.bool() {
                rng.u8(..)
            } else {
                INTERESTING[rng.usize(..INTERESTING.len())]
            };
        }
        // Delete a run.
        2 if len > 0 => {
            let at = rng.usize(..len);
            let n = rng.usize(1..=(len - at).min(16));
            input.drain(at..at + n);
        }
        // Duplicate a run somewhere else.
        3 if len > 0 => {
            let from = rng.usize(..len);
            let n = rng.usize(1..=(len - from).min(64));
            let run = input[from..from + n].to_vec();
            let to = rng.usize(..=len);
            input.splice(to..to, run);
        }
        // Move a byte: swaps of neighbours break and rebuild framing.
        4 if len > 1 => {
            let a = rng.usize(..len);
            let b = rng.usize(..len);
            input.swap(a, b);
        }
        // Splice: this input's head with another's tail.
        5 if !corpus.is_empty() => {
            let other = &corpus[rng.usize(..corpus.len())];
            let cut = rng.usize(..=len);
            let from = rng.usize(..=other.len());
            input.truncate(cut);
            input.extend_from_slice(&other[from..]);
        }
        // A number pushed to an edge: the first digit run after a random point.
        6 => {
            let start = rng.usize(..=len);
            if let Some(first) = input[start..].iter().position(u8::is_ascii_digit) {
                let first = start + first;
                let end = input[first..]
                    .iter()
                    .position(|b| !b.is_ascii_digit())
                    .map_or(len, |n| first + n);
                let edge: &[u8] = match rng.u8(0..5) {
                    0 => b"0",
                    1 => b"4294967296",
                    2 => b"18446744073709551615",
                    3 => b"99999999999999999999999",
                    _ => b"65536",
                };
                input.splice(first..end, edge.iter().copied());
            }
        }
        // Insert random bytes.
        7 => {
            let at = rng.usize(..=len);
            let n = rng.usize(1..=8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
            input.splice(at..at, bytes);
        }
        // Insert or overwrite with a token of the formats.
        _ => {
            let token = TOKENS[rng.usize(..TOKENS.len())];
            let at = rng.usize(..=len);
            if rng.bool() || at + token.len() > len {
                input.splice(at..at, token.iter().copied());
            } else {
                input[at..at + token.len()].copy_from_slice(token);
            }
        }
    }
    input.truncate(MAX_LEN);
}

/// The next input: a corpus entry (or nothing) with one to eight mutations stacked.
pub fn next_input(rng: &mut fastrand::Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut input = if corpus.is_empty() {
        Vec::new()
    } else {
        corpus[rng.usize(..corpus.len())].clone()
    };
    for _ in 0..rng.usize(1..=8) {
        mutate_once(rng, &mut input, corpus);
    }
    input
}

/// An input a target failed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The input.
    pub input: Vec<u8>,
    /// Which input of the run it was (0-based).
    pub iteration: u64,
    /// The panic's message.
    pub message: String,
}

/// Runs `target` on `iterations` inputs derived from `corpus` with `seed`; the first input it
/// panics on, if any.
pub fn run(target: fn(&[u8]), corpus: &[Vec<u8>], seed: u64, iterations: u64) -> Option<Failure> {
    let mut rng = fastrand::Rng::with_seed(seed);
    for iteration in 0..iterations {
        let input = next_input(&mut rng, corpus);
        if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(|| target(&input))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic without a message".to_owned());
            return Some(Failure {
                input,
                iteration,
                message,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn corpus() -> Vec<Vec<u8>> {
        vec![
            b"data: {\"a\":1}\n\n".to_vec(),
            b"GET /callback?x=1".to_vec(),
        ]
    }

    #[test]
    fn the_same_seed_gives_the_same_inputs_and_another_seed_others() {
        let inputs = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..50)
                .map(|_| next_input(&mut rng, &corpus()))
                .collect::<Vec<_>>()
        };
        assert_eq!(inputs(7), inputs(7));
        assert_ne!(inputs(7), inputs(8));
        // Mutated, not replayed.
        assert!(inputs(7).iter().any(|i| !corpus().contains(i)));
    }

    #[test]
    fn inputs_stay_within_the_bound() {
        let big = vec![vec![b'x'; MAX_LEN]];
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..500 {
            assert!(next_input(&mut rng, &big).len() <= MAX_LEN);
        }
    }

    fn panics_on_a_token(data: &[u8]) {
        assert!(!data.windows(6).any(|w| w == b"[DONE]"), "found the token");
    }

    #[test]
    fn a_run_finds_an_input_the_target_fails_on_and_reports_it() {
        let failure = run(panics_on_a_token, &corpus(), 3, 10_000).expect("no failure found");
        assert!(failure.input.windows(6).any(|w| w == b"[DONE]"));
        assert_eq!(failure.message, "found the token");
        // The same seed finds it again at the same point.
        assert_eq!(run(panics_on_a_token, &corpus(), 3, 10_000), Some(failure));
    }

    #[test]
    fn a_run_of_a_sound_target_reports_nothing() {
        assert_eq!(run(|_| {}, &corpus(), 3, 1_000), None);
    }
}
