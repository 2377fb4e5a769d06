--! Previous: sha1:dd05453324aa330e15dd9cbf937611408ee90385
--! Hash: sha1:766dc965ee8af59573aae6ed8259e7913b484320
--! Message: Billing customer mapping follows only newer events

-- Enter migration here

-- ==== billing: a late older event moves no customer mapping, and says it is stale ====
-- docs/voice.md §14: an older Stripe event (new id) arriving late is recorded as processed but
-- does not overwrite newer state. The customer → location mapping had no such guard: a late
-- subscription event naming another location moved the customer there, and with it the
-- customer's later invoices and its subscription's later events without metadata. The mapping now
-- keeps the created time of the newest event it followed, as subscriptions and invoices do.
alter table billing.customers add column if not exists last_event_at timestamptz;
comment on column billing.customers.last_event_at is E'created time of the newest subscription event the mapping followed; an older event arriving late does not move it (docs/voice.md §14).';
update billing.customers c set last_event_at = s.newest
  from (select customer_id, max(last_event_at) as newest from billing.subscriptions group by customer_id) s
 where s.customer_id = c.id and c.last_event_at is null;

CREATE OR REPLACE FUNCTION billing.apply_event(evt jsonb)
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
    -- The mapping moves only with an event newer than every one it has followed (docs/voice.md
    -- §14): a late older event naming another location would otherwise route the customer's
    -- later invoices, and its subscription's later events without metadata, there.
    if cust is not null then
      insert into billing.customers as bc (id, location_id, last_event_at) values (cust, loc, event_at)
      on conflict (id) do update set location_id = coalesce(excluded.location_id, bc.location_id),
        last_event_at = excluded.last_event_at, updated_at = now()
       where bc.last_event_at is null or bc.last_event_at <= excluded.last_event_at;
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
    get diagnostics n = row_count;
    if n = 0 then
      select location_id into loc from billing.subscriptions where id = obj ->> 'id';
    end if;
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
    get diagnostics n = row_count;
    if n = 0 then
      select location_id into loc from billing.invoices where id = obj ->> 'id';
    end if;
  end if;
  -- n = 0: newer state is stored; the event is recorded as processed and changed nothing.
  return jsonb_build_object('status', case when n = 0 then 'stale' else 'applied' end,
                            'event_id', evt ->> 'id', 'type', typ, 'location_id', loc);
end
$function$;
alter function billing.apply_event(jsonb) owner to switchboard_system;
comment on function billing.apply_event(jsonb) is E'Billing webhook: applies one Stripe event (subscriptions, paid/failed invoices) once per event id; an event older than the stored state is recorded but changes nothing (stale, docs/voice.md §14); other types are ignored.';
revoke execute on function billing.apply_event(jsonb) from public;
