//! The parts one process can run. `noema up` runs them all; `noema serve` a subset.

use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Identity,
    Ledger,
    Gateway,
}

impl Role {
    /// Every role, in start order: services before the gateway that fronts them.
    pub const ALL: [Role; 3] = [Role::Identity, Role::Ledger, Role::Gateway];

    pub fn name(self) -> &'static str {
        match self {
            Role::Identity => "identity",
            Role::Ledger => "ledger",
            Role::Gateway => "gateway",
        }
    }

    /// Whether this role is a gRPC service (hosted on the process's gRPC server).
    pub fn is_grpc_service(self) -> bool {
        !matches!(self, Role::Gateway)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|role| role.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Role::ALL.iter().map(|r| r.name()).collect();
                format!(
                    "unknown service {s:?}; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}
