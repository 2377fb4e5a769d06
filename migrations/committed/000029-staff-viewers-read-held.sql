--! Previous: sha1:28e365b7e4a31123ef1ae18e6a87fee898173e61
--! Hash: sha1:6b43f6b2cc291c03b81d81d99a462f125208ae81
--! Message: staff viewers read held

-- ==== Staff viewers read webhook_deliveries.held ====
-- The column added by 000026 is delivery bookkeeping, not caller content: viewers read it like the
-- table's other columns (docs/privacy.md lists what they may not read).
grant select (held) on app.webhook_deliveries to switchboard_staff_viewer;
