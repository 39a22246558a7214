//! Every test of the suite, by area.
//!
//! Ids are `area.topic.case` and never change once published: known-failure lists and
//! reports refer to them. Add a test by writing its function in the area's module and
//! listing it there with [`test_case!`](crate::catalogue::test_case).

mod compute;
mod concurrency;
mod device;
mod events;
mod graphs;
mod kernels;
mod mapping;
mod memory;
mod plugin;
mod streams;
mod stress;
mod timestamps;
mod workloads;

use crate::test_case::TestCase;

/// The areas, in report order.
pub const AREAS: [&str; 11] = [
    "plugin",
    "device",
    "memory",
    "streams",
    "events",
    "graphs",
    "kernels",
    "compute",
    "concurrency",
    "stress",
    "workloads",
];

/// Every test, in area order.
pub fn catalogue() -> Vec<TestCase> {
    let mut tests = Vec::new();
    tests.extend(plugin::tests());
    tests.extend(device::tests());
    tests.extend(memory::tests());
    tests.extend(mapping::tests());
    tests.extend(mapping::pinned_tests());
    tests.extend(streams::tests());
    tests.extend(events::tests());
    tests.extend(graphs::tests());
    tests.extend(kernels::tests());
    tests.extend(compute::tests());
    tests.extend(concurrency::tests());
    tests.extend(stress::tests());
    tests.extend(workloads::tests());
    tests
}

/// Declares a [`TestCase`]: `test_case!("area.topic.case", "what a pass proves", function)`,
/// optionally with a [`Requirement`](crate::Requirement) before the function.
macro_rules! test_case {
    ($id:literal, $description:literal, $run:path) => {
        $crate::test_case::TestCase {
            id: $id,
            description: $description,
            requires: $crate::test_case::Requirement::CORE,
            run: $run,
        }
    };
    ($id:literal, $description:literal, $requires:expr, $run:path) => {
        $crate::test_case::TestCase {
            id: $id,
            description: $description,
            requires: $requires,
            run: $run,
        }
    };
}
pub(crate) use test_case;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_well_formed_and_in_a_known_area() {
        let tests = catalogue();
        let mut seen = HashSet::new();
        for case in &tests {
            assert!(seen.insert(case.id), "duplicate id {}", case.id);
            let segments: Vec<&str> = case.id.split('.').collect();
            assert!(
                segments.len() >= 2
                    && segments.iter().all(|segment| {
                        !segment.is_empty()
                            && segment
                                .chars()
                                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                    }),
                "malformed id {}",
                case.id
            );
            assert!(AREAS.contains(&case.area()), "{} is in no known area", case.id);
            assert!(!case.description.trim().is_empty(), "{} has no description", case.id);
        }
    }

    #[test]
    fn the_catalogue_holds_at_least_120_tests_in_every_area() {
        let tests = catalogue();
        assert!(tests.len() >= 120, "only {} tests", tests.len());
        for area in AREAS {
            assert!(tests.iter().any(|case| case.area() == area), "area {area} is empty");
        }
    }
}
