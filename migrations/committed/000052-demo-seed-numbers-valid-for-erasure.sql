--! Previous: sha1:c880cf81b139e041fedd38f905422424e3438300
--! Hash: sha1:7e60604b1d63ec9cefcbb27269744230cb4c7031
--! Message: demo-seed-numbers-valid-for-erasure

-- Demo seed: callers' numbers that libphonenumber takes as valid (docs/operations.md, demo seed).

CREATE OR REPLACE FUNCTION admin.demo_seed_prepare(location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  first_number bigint;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  -- Seeded customers have numbers +1 202 200 0000 on, valid and dialable in form (an exchange
  -- starts with 2-9), so the erasure runbook can erase one by its phone; a rerun continues after
  -- the highest one (numbers seeded before this change, +1 202 000 …, are skipped past).
  select greatest(coalesce(max(substr(phone, 3)::bigint), 0), 2021999999) + 1 into first_number
    from app.customers where location_id = loc and phone like '+1202%';

  if not exists (select 1 from app.faqs where location_id = loc) then
    insert into app.faqs (location_id, question, answer, position, asked_count) values
      (loc, 'Do you charge for estimates?', 'Estimates are free for replacements; diagnostic visits are $89, credited toward the repair.', 1, 42),
      (loc, 'Do you offer emergency service?', 'Yes, 24/7 for no-heat, no-cooling and active leaks.', 2, 37),
      (loc, 'Which areas do you serve?', 'The metro area and suburbs within 30 miles.', 3, 18),
      (loc, 'Do you offer financing?', 'Yes, 0% for 12 months on approved credit for new systems.', 4, 11);
  end if;
  if not exists (select 1 from app.pricebook_items where location_id = loc) then
    insert into app.pricebook_items (location_id, service_name, price, note, position) values
      (loc, 'Diagnostic visit', '$89', 'Credited toward the repair', 1),
      (loc, 'AC tune-up', '$129-$159', 'Spring special', 2),
      (loc, 'Furnace repair', '$150-$650', 'Most repairs same day', 3),
      (loc, 'Water heater replacement', '$1,400-$2,800', '40-50 gal, installed', 4),
      (loc, 'Drain cleaning', '$175-$325', null, 5);
  end if;
  if not exists (select 1 from app.business_hours where location_id = loc) then
    insert into app.business_hours (location_id, day, open, close)
    select loc, d, '08:00', '18:00' from generate_series(1, 5) d
    union all select loc, 6, '09:00', '14:00';
  end if;
  return jsonb_build_object('location_id', loc, 'first_number', first_number);
end
$function$;
alter function admin.demo_seed_prepare(text) owner to switchboard_system;
comment on function admin.demo_seed_prepare(text) is E'Demo seed, step 1: FAQs, pricebook and business hours when the location has none; returns first_number, the national number (10 digits) the batches'' customers start from.';
revoke execute on function admin.demo_seed_prepare(text) from public;
