//! System mode: RUNNING accepts writes, STOPPED is a write halt (reads continue).

use std::fmt;
use std::str::FromStr;

/// Actor recorded when a mode change names nobody, as open-cognition does.
pub const UNKNOWN_ACTOR: &str = "human:unknown";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SystemMode {
    Running,
    Stopped,
}

impl SystemMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SystemMode::Running => "RUNNING",
            SystemMode::Stopped => "STOPPED",
        }
    }

    /// The audit action recorded when entering this mode.
    pub fn transition_action(self) -> &'static str {
        match self {
            SystemMode::Running => "resume",
            SystemMode::Stopped => "stop",
        }
    }
}

impl fmt::Display for SystemMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SystemMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "RUNNING" => Ok(SystemMode::Running),
            "STOPPED" => Ok(SystemMode::Stopped),
            other => Err(format!("unknown system mode {other:?}")),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemState {
    pub mode: SystemMode,
    pub changed_by: String,
    pub changed_at: time::OffsetDateTime,
}

/// The actor for a mode change: the caller's, or `human:unknown` when empty.
pub fn mode_change_actor(requested: &str) -> String {
    let trimmed = requested.trim();
    if trimmed.is_empty() {
        UNKNOWN_ACTOR.to_owned()
    } else {
        trimmed.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_actor_is_human_unknown() {
        assert_eq!(mode_change_actor(""), "human:unknown");
        assert_eq!(mode_change_actor("  "), "human:unknown");
        assert_eq!(mode_change_actor("ops:alice"), "ops:alice");
    }

    #[test]
    fn modes_round_trip_through_text() {
        for mode in [SystemMode::Running, SystemMode::Stopped] {
            assert_eq!(mode.as_str().parse::<SystemMode>(), Ok(mode));
        }
        assert!("running".parse::<SystemMode>().is_err());
    }
}
