//! The CSV layout of one trip: the 51 columns of `bench/taxi/schema.sql`, in its order, with
//! empty fields for NULLs. Amounts print with two decimals, coordinates with six, timestamps as
//! `YYYY-MM-DD HH:MM:SS`, and the `pickup`/`dropoff` points as PostGIS hex EWKB.

use crate::calendar::{Calendar, SECONDS_PER_DAY};
use crate::csv::{push_f64_hex_le, Line};
use crate::trip::{Fare, Place, Trip};

pub const COLUMN_COUNT: usize = 51;

/// Little-endian EWKB header of a 2-D point with SRID 4326: byte order 01, type 0x20000001
/// (point with SRID), SRID 0x10E6.
const EWKB_POINT_4326: &[u8] = b"0101000020E6100000";

pub fn write_trip(out: &mut Vec<u8>, trip_id: u64, trip: &Trip, calendar: &Calendar) {
    let meter = trip.meter.as_ref();
    let dropoff = meter.map(|m| &m.dropoff);
    let mut line = Line::new(out);
    line.int(trip_id as i64);
    line.opt_text(meter.map(|m| m.vendor_id));
    timestamp(&mut line, calendar, Some(trip.pickup_s));
    timestamp(&mut line, calendar, meter.map(|m| m.dropoff_s));
    line.opt_text(meter.and_then(|m| m.store_and_fwd_flag));
    line.opt_int(meter.map(|m| m.rate_code_id));
    coordinates(&mut line, Some(&trip.pickup));
    coordinates(&mut line, dropoff);
    line.opt_int(meter.map(|m| m.passenger_count));
    line.opt_fixed::<2>(meter.map(|m| m.trip_distance_centi_miles));
    amounts(&mut line, meter.map(|m| &m.fare));
    line.opt_text(meter.map(|m| m.payment_type));
    line.opt_int(meter.and_then(|m| m.trip_type));
    point(&mut line, Some(&trip.pickup));
    point(&mut line, dropoff);
    line.text(trip.cab.name());
    weather(&mut line, calendar, trip.pickup_s);
    location(&mut line, Some(&trip.pickup));
    location(&mut line, dropoff);
    let fields = line.finish();
    debug_assert_eq!(fields, COLUMN_COUNT);
}

fn timestamp(line: &mut Line, calendar: &Calendar, seconds: Option<u32>) {
    if let Some(s) = seconds {
        calendar.push_timestamp(line.raw(), s);
    }
    line.end_field();
}

fn coordinates(line: &mut Line, place: Option<&Place>) {
    match place {
        Some(p) => {
            line.fixed::<6>(p.lon_micro);
            line.fixed::<6>(p.lat_micro);
        }
        None => {
            line.null();
            line.null();
        }
    }
}

/// fare_amount .. total_amount: eight columns.
fn amounts(line: &mut Line, fare: Option<&Fare>) {
    let Some(f) = fare else {
        for _ in 0..8 {
            line.null();
        }
        return;
    };
    line.fixed::<2>(f.fare);
    line.fixed::<2>(f.extra);
    line.fixed::<2>(f.mta_tax);
    line.fixed::<2>(f.tip);
    line.fixed::<2>(f.tolls);
    line.opt_fixed::<2>(f.ehail_fee);
    line.fixed::<2>(f.improvement_surcharge);
    line.fixed::<2>(f.total());
}

/// A hex EWKB point; NULL when the trip has no coordinates.
fn point(line: &mut Line, place: Option<&Place>) {
    if let Some(p) = place.filter(|p| p.has_point()) {
        let out = line.raw();
        out.extend_from_slice(EWKB_POINT_4326);
        push_f64_hex_le(out, p.lon());
        push_f64_hex_le(out, p.lat());
    }
    line.end_field();
}

fn weather(line: &mut Line, calendar: &Calendar, pickup_s: u32) {
    let w = &calendar.day(pickup_s / SECONDS_PER_DAY).weather;
    for v in [
        w.precipitation,
        w.snow_depth,
        w.snowfall,
        w.max_temperature,
        w.min_temperature,
        w.average_wind_speed,
    ] {
        line.int(v as i64);
    }
}

/// The ten census-tract columns; NULL outside the known tracts.
fn location(line: &mut Line, place: Option<&Place>) {
    let Some(t) = place.and_then(|p| p.tract()) else {
        for _ in 0..10 {
            line.null();
        }
        return;
    };
    line.int(t.nyct2010_gid);
    line.text(t.ctlabel);
    line.int(t.borocode);
    line.text(t.boroname());
    line.text(t.ct2010);
    line.text(t.boroct2010);
    line.text(t.cdeligibil);
    line.text(t.ntacode);
    line.text(t.ntaname);
    line.text(t.puma);
}
