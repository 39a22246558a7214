//! The comparison against the real oracle: a run agrees with itself, and the comparator
//! catches a changed input and a deliberately wrong result. A comparator that cannot fail
//! would make every run of the tester pass.

use xhal_difftest::compare::{judge, Verdict};
use xhal_difftest::emit::emit;
use xhal_difftest::gen::{generate, inputs};
use xhal_difftest::run::{Job, Oracle, Outcome};

fn ran(outcome: Outcome) -> Vec<Vec<u8>> {
    match outcome {
        Outcome::Ran { buffers } => buffers,
        other => panic!("the oracle did not run the kernel: {other:?}"),
    }
}

#[test]
fn the_oracle_agrees_with_itself_and_the_comparator_catches_differences() {
    let oracle = Oracle::new().expect("the CPU interpreter");
    let mut caught_input_change = false;
    for seed in 0..12 {
        let program = generate(seed);
        let emitted = emit(&program);
        let data = inputs(seed);
        let job = Job::new(&program, &emitted, &data);
        let first = ran(oracle.run(&job));
        // Deterministic: the same job gives the same bytes.
        let again = oracle.run(&job);
        assert_eq!(
            judge(&emitted.buffers, emitted.slots, &first, &again),
            Verdict::Agrees,
            "seed {seed} is not deterministic on the oracle"
        );

        // A deliberately wrong result: one bit of the last word flipped.
        let mut wrong = first.clone();
        if let Some(byte) = wrong
            .iter_mut()
            .rev()
            .find(|b| !b.is_empty())
            .and_then(|b| b.last_mut())
        {
            *byte ^= 0x80;
            let verdict = judge(
                &emitted.buffers,
                emitted.slots,
                &first,
                &Outcome::Ran { buffers: wrong },
            );
            assert!(matches!(verdict, Verdict::Differs { .. }), "seed {seed}: {verdict:?}");
            assert!(verdict.is_finding());
        }

        // Every input word changed: most programs read some input, so their results move.
        let mut changed = data.clone();
        for word in changed.input.iter_mut().take(64) {
            *word = word.wrapping_add(0x9E37_79B9);
        }
        let other = oracle.run(&Job::new(&program, &emitted, &changed));
        if matches!(
            judge(&emitted.buffers, emitted.slots, &first, &other),
            Verdict::Differs { .. }
        ) {
            caught_input_change = true;
        }
    }
    assert!(caught_input_change, "no program's result depended on its input");
}

#[test]
fn failures_and_refusals_are_told_apart() {
    let oracle_bytes = vec![vec![0u8; 4]];
    let refused = Outcome::Refused {
        message: "unsupported: f16".to_owned(),
    };
    let failed = Outcome::Failed {
        stage: "run".to_owned(),
        kind: "kernel_fault".to_owned(),
        message: "index out of bounds".to_owned(),
    };
    assert!(!judge(&[], 0, &oracle_bytes, &refused).is_finding());
    assert!(judge(&[], 0, &oracle_bytes, &failed).is_finding());
    assert!(judge(&[], 0, &oracle_bytes, &Outcome::Hung { seconds: 5 }).is_finding());
}
