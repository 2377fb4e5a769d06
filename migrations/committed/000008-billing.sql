--! Previous: sha1:8dad48edd97d1a435f9a3de50c5725d1332c095a
--! Hash: sha1:f04b6b6381c6e90bdc2ddb63f3d1ac6d40be7b9a
--! Message: billing

-- Billing (Stripe sync): schema billing, which the API role cannot see; staff read it.

create schema billing;
comment on schema billing is E'Subscriptions and invoices synced from Stripe. No API token reaches it: the API role has no usage on this schema; staff do.';

create table billing.customers (
  id text not null,
  location_id uuid,
  email text,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint customers_pkey primary key (id),
  constraint customers_location_id_fkey foreign key (location_id) references app.locations (id) on delete set null
);
comment on table billing.customers is E'Stripe customers and the location each pays for.';
create index customers_location_idx on billing.customers (location_id);

create table billing.subscriptions (
  id text not null,
  location_id uuid,
  customer_id text,
  status text not null,
  price_id text,
  quantity integer,
  current_period_end timestamp with time zone,
  cancel_at_period_end boolean default false not null,
  canceled_at timestamp with time zone,
  raw jsonb not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  last_event_at timestamp with time zone,
  constraint subscriptions_pkey primary key (id),
  constraint subscriptions_location_id_fkey foreign key (location_id) references app.locations (id) on delete set null
);
comment on table billing.subscriptions is E'A location''s plan; status mirrors Stripe (active, past_due, canceled…).';
comment on column billing.subscriptions.current_period_end is E'From items.data[0].current_period_end.';
comment on column billing.subscriptions.last_event_at is E'created time of the newest Stripe event applied; an older event arriving late does not overwrite newer state.';
create index subscriptions_location_idx on billing.subscriptions (location_id);
create index subscriptions_customer_idx on billing.subscriptions (customer_id);

create table billing.invoices (
  id text not null,
  location_id uuid,
  subscription_id text,
  customer_id text,
  status text not null,
  amount_due bigint,
  amount_paid bigint,
  currency text,
  hosted_invoice_url text,
  paid_at timestamp with time zone,
  payment_failed_at timestamp with time zone,
  raw jsonb not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  last_event_at timestamp with time zone,
  constraint invoices_pkey primary key (id),
  constraint invoices_location_id_fkey foreign key (location_id) references app.locations (id) on delete set null
);
comment on table billing.invoices is E'Invoices; the subscription comes from parent.subscription_details.subscription.';
comment on column billing.invoices.last_event_at is E'created time of the newest Stripe event applied; an older event arriving late does not overwrite newer state.';
create index invoices_location_idx on billing.invoices (location_id);
create index invoices_subscription_idx on billing.invoices (subscription_id);

create table billing.processed_events (
  id text not null,
  type text not null,
  received_at timestamp with time zone default now() not null,
  constraint processed_events_pkey primary key (id)
);
comment on table billing.processed_events is E'Stripe event ids already applied; replays are ignored.';

create function billing.ref_id(ref jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select case jsonb_typeof(ref) when 'object' then ref ->> 'id' when 'string' then ref #>> '{}' end $function$;
comment on function billing.ref_id(jsonb) is E'Id of a Stripe reference that is either an id string or an expanded object.';

create function billing.location_ref(meta jsonb)
 RETURNS uuid
 LANGUAGE sql
 STABLE
AS $function$
  select l.id from app.locations l
   where meta ->> 'location_id' ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'
     and l.id = (meta ->> 'location_id')::uuid
$function$;
comment on function billing.location_ref(jsonb) is E'The existing location named by metadata.location_id, or null.';

create function billing.apply_event(evt jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  typ text := evt ->> 'type';
  obj jsonb := evt -> 'data' -> 'object';
  event_at timestamptz := coalesce(to_timestamp((evt ->> 'created')::bigint), now());
  cust text := billing.ref_id(obj -> 'customer');
  item jsonb := obj #> '{items,data,0}';
  sub_id text;
  loc uuid;
  n int;
begin
  if typ not in ('customer.subscription.created', 'customer.subscription.updated', 'customer.subscription.deleted',
                 'invoice.paid', 'invoice.payment_failed') then
    return jsonb_build_object('status', 'ignored', 'event_id', evt ->> 'id', 'type', typ);
  end if;
  insert into billing.processed_events (id, type) values (evt ->> 'id', typ) on conflict (id) do nothing;
  get diagnostics n = row_count;
  if n = 0 then
    return jsonb_build_object('status', 'duplicate', 'event_id', evt ->> 'id', 'type', typ);
  end if;

  if typ like 'customer.subscription.%' then
    loc := coalesce(billing.location_ref(obj -> 'metadata'),
                    (select location_id from billing.customers where id = cust));
    if cust is not null then
      insert into billing.customers as bc (id, location_id) values (cust, loc)
      on conflict (id) do update set location_id = coalesce(excluded.location_id, bc.location_id), updated_at = now()
       where excluded.location_id is distinct from bc.location_id and excluded.location_id is not null;
    end if;
    insert into billing.subscriptions as s (id, location_id, customer_id, status, price_id, quantity,
      current_period_end, cancel_at_period_end, canceled_at, raw, last_event_at)
    values (obj ->> 'id', loc, cust,
            coalesce(obj ->> 'status', case when typ = 'customer.subscription.deleted' then 'canceled' else 'unknown' end),
            item #>> '{price,id}', (item ->> 'quantity')::int,
            to_timestamp((item ->> 'current_period_end')::bigint),
            coalesce((obj ->> 'cancel_at_period_end')::boolean, false),
            to_timestamp((obj ->> 'canceled_at')::bigint), obj, event_at)
    on conflict (id) do update set
      location_id = coalesce(excluded.location_id, s.location_id), customer_id = excluded.customer_id,
      status = excluded.status, price_id = excluded.price_id, quantity = excluded.quantity,
      current_period_end = excluded.current_period_end, cancel_at_period_end = excluded.cancel_at_period_end,
      canceled_at = excluded.canceled_at, raw = excluded.raw, last_event_at = excluded.last_event_at,
      updated_at = now()
     where s.last_event_at is null or s.last_event_at <= excluded.last_event_at;
  else
    sub_id := coalesce(billing.ref_id(obj #> '{parent,subscription_details,subscription}'),
                       billing.ref_id(obj -> 'subscription'));
    loc := coalesce(billing.location_ref(obj #> '{parent,subscription_details,metadata}'),
                    billing.location_ref(obj -> 'metadata'),
                    (select location_id from billing.subscriptions where id = sub_id),
                    (select location_id from billing.customers where id = cust));
    insert into billing.invoices as i (id, location_id, subscription_id, customer_id, status, amount_due,
      amount_paid, currency, hosted_invoice_url, paid_at, payment_failed_at, raw, last_event_at)
    values (obj ->> 'id', loc, sub_id, cust,
            coalesce(obj ->> 'status', case when typ = 'invoice.paid' then 'paid' else 'open' end),
            (obj ->> 'amount_due')::bigint, (obj ->> 'amount_paid')::bigint, obj ->> 'currency',
            obj ->> 'hosted_invoice_url',
            case when typ = 'invoice.paid' then coalesce(to_timestamp((obj #>> '{status_transitions,paid_at}')::bigint), event_at) end,
            case when typ = 'invoice.payment_failed' then event_at end, obj, event_at)
    on conflict (id) do update set
      location_id = coalesce(excluded.location_id, i.location_id), subscription_id = coalesce(excluded.subscription_id, i.subscription_id),
      customer_id = excluded.customer_id, status = excluded.status, amount_due = excluded.amount_due,
      amount_paid = excluded.amount_paid, currency = excluded.currency, hosted_invoice_url = excluded.hosted_invoice_url,
      paid_at = coalesce(excluded.paid_at, i.paid_at), payment_failed_at = coalesce(excluded.payment_failed_at, i.payment_failed_at),
      raw = excluded.raw, last_event_at = excluded.last_event_at, updated_at = now()
     where i.last_event_at is null or i.last_event_at <= excluded.last_event_at;
  end if;
  return jsonb_build_object('status', 'applied', 'event_id', evt ->> 'id', 'type', typ, 'location_id', loc);
end
$function$;
alter function billing.apply_event(jsonb) owner to switchboard_system;
comment on function billing.apply_event(jsonb) is E'Billing webhook: applies one Stripe event (subscriptions, paid/failed invoices) once per event id; other types are ignored.';

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
grant usage on schema billing to switchboard_staff;
grant usage, create on schema billing to switchboard_system;
grant select, insert, update, delete on billing.customers to switchboard_staff;
grant select, insert, update, delete on billing.customers to switchboard_system;
grant select, insert, update, delete on billing.subscriptions to switchboard_staff;
grant select, insert, update, delete on billing.subscriptions to switchboard_system;
grant select, insert, update, delete on billing.invoices to switchboard_staff;
grant select, insert, update, delete on billing.invoices to switchboard_system;
grant select, insert, update, delete on billing.processed_events to switchboard_staff;
grant select, insert, update, delete on billing.processed_events to switchboard_system;
revoke execute on function billing.apply_event(jsonb) from public;
