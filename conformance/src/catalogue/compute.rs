//! The `compute` area.

use crate::test_case::TestCase;

pub(super) fn tests() -> Vec<TestCase> {
    vec![]
}
