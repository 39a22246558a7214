//! The performance profile: informational figures a report carries.
