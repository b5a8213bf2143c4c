//! The parts one process can run: every registered service, and the gateway. `noema up`
//! runs them all; `noema serve` a subset.

use std::fmt;

use noema_runtime::Registry;
use noema_runtime::registry::GATEWAY;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// A registered gRPC service, by name.
    Service(&'static str),
    /// The REST gateway in front of every service.
    Gateway,
}

impl Role {
    /// Every role of `registry`, in start order: services (each after the services it
    /// calls), then the gateway that fronts them.
    pub fn all(registry: &Registry) -> Vec<Role> {
        registry
            .names()
            .into_iter()
            .map(Role::Service)
            .chain([Role::Gateway])
            .collect()
    }

    /// Every role's name (the values `noema serve` accepts).
    pub fn names(registry: &Registry) -> Vec<&'static str> {
        Role::all(registry).into_iter().map(Role::name).collect()
    }

    /// The role named `name` in `registry`.
    pub fn parse(registry: &Registry, name: &str) -> Result<Role, String> {
        Role::all(registry)
            .into_iter()
            .find(|role| role.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown service {name:?}; expected one of: {}",
                    Role::names(registry).join(", ")
                )
            })
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::Service(name) => name,
            Role::Gateway => GATEWAY,
        }
    }

    /// Whether this role is a gRPC service (hosted on the process's gRPC server).
    pub fn is_grpc_service(self) -> bool {
        matches!(self, Role::Service(_))
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn roles_come_from_the_registry() {
        let registry = crate::registry::builtin().unwrap();
        assert_eq!(
            Role::names(&registry),
            [
                "identity",
                "ledger",
                "continuity",
                "orchestrator",
                "world",
                "gateway"
            ]
        );
        assert_eq!(
            Role::parse(&registry, "ledger"),
            Ok(Role::Service("ledger"))
        );
        assert_eq!(Role::parse(&registry, "gateway"), Ok(Role::Gateway));
        let err = Role::parse(&registry, "ledgr").unwrap_err();
        assert!(
            err.contains("identity, ledger, continuity, orchestrator, world, gateway"),
            "{err}"
        );
    }
}
