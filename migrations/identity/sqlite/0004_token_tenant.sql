-- A token's tenant: whose agent-written data (capsules, …) it acts on. Set when the token is
-- issued, by default its peer_id, so several tokens can act for one agent.
ALTER TABLE tokens ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
UPDATE tokens SET tenant = peer_id WHERE tenant = '';
