//! One taxi trip, drawn from distributions shaped like the public NYC data: which cab, when, from
//! which census tract to which, how far, how long, and what the meter charged. Amounts are whole
//! cents and coordinates whole micro-degrees, so the CSV prints them exactly and `total_amount`
//! is exactly the sum of its parts. Uber trips carry only a pick-up time and place, as in the
//! data set, and the rest of their columns are NULL.

use crate::calendar::{day_index, Calendar, SECONDS_PER_DAY};
use crate::choice::WeightedChoice;
use crate::city::{self, City, Tract, JFK, TRACTS};
use rand::rngs::SmallRng;
use rand::RngCore;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cab {
    Yellow,
    Green,
    Uber,
}

impl Cab {
    pub fn name(self) -> &'static str {
        match self {
            Cab::Yellow => "yellow",
            Cab::Green => "green",
            Cab::Uber => "uber",
        }
    }
}

/// A point as it is printed, in micro-degrees, and the tract it lies in (None outside the
/// tracts the generator knows). (0, 0) is the real data's "no coordinates".
#[derive(Clone, Copy)]
pub struct Place {
    pub lon_micro: i64,
    pub lat_micro: i64,
    pub tract: Option<usize>,
}

impl Place {
    const MISSING: Place = Place {
        lon_micro: 0,
        lat_micro: 0,
        tract: None,
    };

    fn at(lon: f64, lat: f64, tract: Option<usize>) -> Place {
        Place {
            lon_micro: (lon * 1e6).round() as i64,
            lat_micro: (lat * 1e6).round() as i64,
            tract,
        }
    }

    /// The degrees a reader of the CSV text gets back: the exact quotient is correctly rounded,
    /// as a decimal parser rounds the printed digits.
    pub fn lon(&self) -> f64 {
        self.lon_micro as f64 / 1e6
    }

    pub fn lat(&self) -> f64 {
        self.lat_micro as f64 / 1e6
    }

    pub fn has_point(&self) -> bool {
        self.lon_micro != 0 || self.lat_micro != 0
    }

    pub fn tract(&self) -> Option<&'static Tract> {
        self.tract.map(|t| &TRACTS[t])
    }

    fn in_manhattan(&self) -> bool {
        self.tract().is_some_and(|t| t.borocode == 1)
    }
}

/// The fare columns, in cents.
pub struct Fare {
    pub fare: i64,
    pub extra: i64,
    pub mta_tax: i64,
    pub tip: i64,
    pub tolls: i64,
    pub ehail_fee: Option<i64>,
    pub improvement_surcharge: i64,
}

impl Fare {
    pub fn total(&self) -> i64 {
        self.fare
            + self.extra
            + self.mta_tax
            + self.tip
            + self.tolls
            + self.ehail_fee.unwrap_or(0)
            + self.improvement_surcharge
    }

    /// Disputed and no-charge trips appear in the data as refunds with every amount negative.
    fn negate(&mut self) {
        for amount in [
            &mut self.fare,
            &mut self.extra,
            &mut self.mta_tax,
            &mut self.tip,
            &mut self.tolls,
        ] {
            *amount = -*amount;
        }
        self.improvement_surcharge = -self.improvement_surcharge;
    }
}

/// What a taxi's meter records; Uber trips in the data set have none of it.
pub struct Meter {
    pub vendor_id: &'static str,
    pub dropoff_s: u32,
    pub store_and_fwd_flag: Option<&'static str>,
    pub rate_code_id: i64,
    pub dropoff: Place,
    pub passenger_count: i64,
    pub trip_distance_centi_miles: i64,
    pub fare: Fare,
    pub payment_type: &'static str,
    pub trip_type: Option<i64>,
}

pub struct Trip {
    pub cab: Cab,
    /// Seconds since 2009-01-01 00:00:00.
    pub pickup_s: u32,
    pub pickup: Place,
    pub meter: Option<Meter>,
}

const CABS: [Cab; 3] = [Cab::Yellow, Cab::Green, Cab::Uber];
const CAB_WEIGHTS: [f64; 3] = [0.91, 0.065, 0.025];
/// Relative demand per hour of the day: lowest before dawn, highest in the evening.
#[rustfmt::skip]
const HOUR_WEIGHTS: [f64; 24] = [
    5.5, 4.2, 3.2, 2.4, 1.8, 1.6, 2.7, 4.0, 4.6, 4.6, 4.4, 4.5,
    4.7, 4.7, 4.9, 4.8, 4.3, 5.0, 6.0, 6.3, 5.9, 5.8, 5.9, 5.4,
];
/// Stands for the junk values (7 to 255) that the public data carries.
const JUNK_PASSENGER_COUNT: i64 = -1;
const PASSENGER_COUNTS: [i64; 8] = [0, 1, 2, 3, 4, 5, 6, JUNK_PASSENGER_COUNT];
/// Per million trips, from the benchmark's published counts.
const PASSENGER_COUNT_WEIGHTS: [f64; 8] = [
    6_500.0, 695_000.0, 144_000.0, 43_000.0, 21_000.0, 68_000.0, 22_000.0, 500.0,
];
/// Rate code 2 (JFK flat fare) is not here: it follows from the trip's tracts.
const RATE_CODES: [i64; 6] = [1, 3, 4, 5, 6, 99];
const RATE_CODE_WEIGHTS: [f64; 6] = [0.988, 0.001, 0.001, 0.009, 0.0005, 0.0005];
const PAYMENT_TYPES: [&str; 5] = ["CRE", "CSH", "NOC", "DIS", "UNK"];
const PAYMENT_TYPE_WEIGHTS: [f64; 5] = [0.52, 0.46, 0.01, 0.005, 0.005];
const VENDORS_BEFORE_2015: [&str; 3] = ["CMT", "VTS", "DDS"];
const VENDOR_WEIGHTS_BEFORE_2015: [f64; 3] = [0.48, 0.49, 0.03];
const VENDORS_SINCE_2015: [&str; 2] = ["1", "2"];
const VENDOR_WEIGHTS_SINCE_2015: [f64; 2] = [0.47, 0.53];

const GREEN_FIRST_DAY: u32 = day_index(2013, 8, 1);
const UBER_FIRST_DAY: u32 = day_index(2014, 4, 1);
const UBER_LAST_DAY: u32 = day_index(2015, 6, 30);
const MTA_TAX_FIRST_DAY: u32 = day_index(2009, 3, 1);
const FARES_2012_FIRST_DAY: u32 = day_index(2012, 9, 4);
const SURCHARGE_FIRST_DAY: u32 = day_index(2015, 1, 1);
const YEAR_2015_FIRST_DAY: u32 = day_index(2015, 1, 1);

/// Shares of trips with a property the real data has at roughly this rate.
const LONG_TRIP_SHARE: f64 = 0.025;
const SAME_TRACT_SHARE: f64 = 0.25;
const MISSING_COORDINATES_SHARE: f64 = 0.015;
const ZERO_DISTANCE_SHARE: f64 = 0.004;
const GARBAGE_DISTANCE_SHARE: f64 = 0.000_02;
const TRIP_DURATION_MAX_S: f64 = 7200.0;
const CITY_MILES_MAX: f64 = 5.0;
const DIRECTION_COUNT: usize = 16;

/// Everything fixed for a seed: the calendar with its weather, the city and the distributions.
/// It is shared read-only by all generator threads.
pub struct TripModel {
    pub calendar: Calendar,
    city: City,
    cab: WeightedChoice,
    hour: WeightedChoice,
    passenger_count: WeightedChoice,
    rate_code: WeightedChoice,
    payment_type: WeightedChoice,
    vendor_before_2015: WeightedChoice,
    vendor_since_2015: WeightedChoice,
    /// Unit vectors for trips that leave the known tracts.
    directions: [(f64, f64); DIRECTION_COUNT],
}

#[inline]
fn unit(rng: &mut SmallRng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[inline]
fn below(rng: &mut SmallRng, n: u32) -> u32 {
    ((rng.next_u32() as u64 * n as u64) >> 32) as u32
}

#[inline]
fn chance(rng: &mut SmallRng, probability: f64) -> bool {
    unit(rng) < probability
}

/// A point around a tract's centre, denser near the centre (triangular in each axis).
fn point_near(rng: &mut SmallRng, tract: usize) -> Place {
    let t = &TRACTS[tract];
    let lon = t.lon + (unit(rng) + unit(rng) - 1.0) * city::SPREAD_LON_DEGREES;
    let lat = t.lat + (unit(rng) + unit(rng) - 1.0) * city::SPREAD_LAT_DEGREES;
    Place::at(lon, lat, Some(tract))
}

struct Route {
    dropoff: Place,
    miles: f64,
}

/// The inputs of the fare beyond the random draws.
struct FareInputs {
    cab: Cab,
    day_index: u32,
    hour: u32,
    weekday: u8,
    miles: f64,
    duration_s: u32,
    rate_code_id: i64,
    payment_type: &'static str,
    crosses_river: bool,
}

impl TripModel {
    pub fn new(seed: u64) -> Self {
        let directions = std::array::from_fn(|i| {
            let angle = 2.0 * std::f64::consts::PI * i as f64 / DIRECTION_COUNT as f64;
            (angle.cos(), angle.sin())
        });
        TripModel {
            calendar: Calendar::new(seed),
            city: City::new(),
            cab: WeightedChoice::new(&CAB_WEIGHTS),
            hour: WeightedChoice::new(&HOUR_WEIGHTS),
            passenger_count: WeightedChoice::new(&PASSENGER_COUNT_WEIGHTS),
            rate_code: WeightedChoice::new(&RATE_CODE_WEIGHTS),
            payment_type: WeightedChoice::new(&PAYMENT_TYPE_WEIGHTS),
            vendor_before_2015: WeightedChoice::new(&VENDOR_WEIGHTS_BEFORE_2015),
            vendor_since_2015: WeightedChoice::new(&VENDOR_WEIGHTS_SINCE_2015),
            directions,
        }
    }

    pub fn draw(&self, rng: &mut SmallRng) -> Trip {
        let cab = CABS[self.cab.pick(rng.next_u64())];
        let pickup_s = self.draw_pickup_time(rng, cab);
        let tracts = if cab == Cab::Green {
            &self.city.green_pickup
        } else {
            &self.city.yellow_pickup
        };
        let pickup_tract = tracts.pick(rng.next_u64());
        let mut pickup = point_near(rng, pickup_tract);
        let mut meter = None;
        if cab != Cab::Uber {
            let mut m = self.draw_meter(rng, cab, pickup_s, &pickup);
            // The route (and so distance, duration and fare) was drawn from the real points;
            // only the recorded coordinates are lost.
            if chance(rng, MISSING_COORDINATES_SHARE) {
                pickup = Place::MISSING;
                m.dropoff = Place::MISSING;
            }
            meter = Some(m);
        }
        Trip {
            cab,
            pickup_s,
            pickup,
            meter,
        }
    }

    /// A uniform day within the cab's years of service, an hour by demand, a uniform second.
    fn draw_pickup_time(&self, rng: &mut SmallRng, cab: Cab) -> u32 {
        let (first_day, last_day) = match cab {
            Cab::Yellow => (0, crate::calendar::LAST_DAY),
            Cab::Green => (GREEN_FIRST_DAY, crate::calendar::LAST_DAY),
            Cab::Uber => (UBER_FIRST_DAY, UBER_LAST_DAY),
        };
        let day = first_day + below(rng, last_day - first_day + 1);
        let hour = self.hour.pick(rng.next_u64()) as u32;
        day * SECONDS_PER_DAY + hour * 3600 + below(rng, 3600)
    }

    fn draw_meter(&self, rng: &mut SmallRng, cab: Cab, pickup_s: u32, pickup: &Place) -> Meter {
        let day_index = pickup_s / SECONDS_PER_DAY;
        let hour = pickup_s % SECONDS_PER_DAY / 3600;
        let weekday = self.calendar.day(day_index).weekday;
        let route = self.draw_route(rng, pickup);
        let rush = weekday < 5 && (8..20).contains(&hour);
        // City streets for the first few miles, highway speeds beyond.
        let pace_s_per_mile = (140.0 + 160.0 * unit(rng)) * if rush { 1.3 } else { 1.0 };
        let highway_pace_s_per_mile = 90.0 + 40.0 * unit(rng);
        let city_miles = route.miles.min(CITY_MILES_MAX);
        let duration_s = (90.0
            + city_miles * pace_s_per_mile
            + (route.miles - city_miles) * highway_pace_s_per_mile)
            .min(TRIP_DURATION_MAX_S) as u32;
        let touches_jfk = pickup.tract == Some(JFK) || route.dropoff.tract == Some(JFK);
        let rate_code_id = if touches_jfk && chance(rng, 0.6) {
            2
        } else {
            RATE_CODES[self.rate_code.pick(rng.next_u64())]
        };
        let payment_type = PAYMENT_TYPES[self.payment_type.pick(rng.next_u64())];
        let crosses_river = !pickup.in_manhattan() || !route.dropoff.in_manhattan();
        let fare = self.draw_fare(
            rng,
            &FareInputs {
                cab,
                day_index,
                hour,
                weekday,
                miles: route.miles,
                duration_s,
                rate_code_id,
                payment_type,
                crosses_river,
            },
        );
        let vendor_id = if cab == Cab::Green || day_index >= YEAR_2015_FIRST_DAY {
            VENDORS_SINCE_2015[self.vendor_since_2015.pick(rng.next_u64())]
        } else {
            VENDORS_BEFORE_2015[self.vendor_before_2015.pick(rng.next_u64())]
        };
        // VTS and DDS never reported the store-and-forward flag.
        let store_and_fwd_flag = match vendor_id {
            "VTS" | "DDS" => None,
            _ => Some(if chance(rng, 0.01) { "Y" } else { "N" }),
        };
        let trip_type = (cab == Cab::Green).then(|| if chance(rng, 0.02) { 2 } else { 1 });
        Meter {
            vendor_id,
            dropoff_s: pickup_s + duration_s,
            store_and_fwd_flag,
            rate_code_id,
            dropoff: route.dropoff,
            passenger_count: self.draw_passenger_count(rng),
            trip_distance_centi_miles: draw_recorded_distance(rng, route.miles),
            fare,
            payment_type,
            trip_type,
        }
    }

    /// Most trips end in a known tract (a quarter of them in the one they started in), a few
    /// leave the city's centre; the distance driven is the straight line times a road factor.
    fn draw_route(&self, rng: &mut SmallRng, pickup: &Place) -> Route {
        let r = unit(rng);
        let dropoff = if r < LONG_TRIP_SHARE {
            let straight_miles = (8.0 + 17.0 * unit(rng)) / 1.3;
            let (dx, dy) = self.directions[below(rng, DIRECTION_COUNT as u32) as usize];
            let lon = pickup.lon() + dx * straight_miles / city::MILES_PER_LON_DEGREE;
            let lat = pickup.lat() + dy * straight_miles / city::MILES_PER_LAT_DEGREE;
            Place::at(lon, lat, None)
        } else if r < LONG_TRIP_SHARE + SAME_TRACT_SHARE && pickup.tract.is_some() {
            point_near(rng, pickup.tract.expect("checked"))
        } else {
            let dropoff_tract = self.city.dropoff.pick(rng.next_u64());
            point_near(rng, dropoff_tract)
        };
        let road_factor = 1.15 + 0.3 * unit(rng);
        let straight =
            city::miles_between(pickup.lon(), pickup.lat(), dropoff.lon(), dropoff.lat());
        Route {
            dropoff,
            miles: straight * road_factor + 0.05,
        }
    }

    fn draw_passenger_count(&self, rng: &mut SmallRng) -> i64 {
        match PASSENGER_COUNTS[self.passenger_count.pick(rng.next_u64())] {
            JUNK_PASSENGER_COUNT if chance(rng, 0.8) => 7 + below(rng, 3) as i64,
            JUNK_PASSENGER_COUNT => 10 + below(rng, 246) as i64,
            count => count,
        }
    }

    /// NYC's meter: a flag drop and a rate per mile (raised in September 2012), a waiting-time
    /// charge, rounded to half dollars; flat JFK fares; night and rush-hour extras; taxes.
    fn draw_fare(&self, rng: &mut SmallRng, input: &FareInputs) -> Fare {
        let new_fares = input.day_index >= FARES_2012_FIRST_DAY;
        let per_mile_cents = if new_fares { 250.0 } else { 200.0 };
        let waiting_min = input.duration_s as f64 / 60.0 * (0.1 + 0.2 * unit(rng));
        let metered = 250.0 + per_mile_cents * input.miles + 50.0 * waiting_min;
        let fare = match input.rate_code_id {
            2 if new_fares => 5200,
            2 => 4500,
            5 => 2000 + 100 * below(rng, 80) as i64,
            _ => (metered / 50.0).round() as i64 * 50,
        };
        let extra = match input.hour {
            20.. | 0..6 => 50,
            16..20 if input.weekday < 5 => 100,
            _ => 0,
        };
        let toll_cents = if input.day_index >= YEAR_2015_FIRST_DAY {
            554
        } else {
            500
        };
        let tolls = if chance(rng, if input.crosses_river { 0.35 } else { 0.01 }) {
            toll_cents
        } else {
            0
        };
        let tip = if input.payment_type == "CRE" && !chance(rng, 0.1) {
            ((fare + extra) as f64 * (0.12 + 0.16 * unit(rng))).round() as i64
        } else {
            0
        };
        let mut result = Fare {
            fare,
            extra,
            mta_tax: if input.day_index >= MTA_TAX_FIRST_DAY {
                50
            } else {
                0
            },
            tip,
            tolls,
            ehail_fee: (input.cab == Cab::Green && chance(rng, 0.01)).then_some(0),
            improvement_surcharge: if input.day_index >= SURCHARGE_FIRST_DAY {
                30
            } else {
                0
            },
        };
        if matches!(input.payment_type, "DIS" | "NOC") && chance(rng, 0.2) {
            result.negate();
        }
        result
    }
}

/// The meter's distance in hundredths of a mile: usually the route, sometimes zero (meter not
/// engaged), very rarely garbage up to a few million miles.
fn draw_recorded_distance(rng: &mut SmallRng, miles: f64) -> i64 {
    let r = unit(rng);
    if r < ZERO_DISTANCE_SHARE {
        0
    } else if r < ZERO_DISTANCE_SHARE + GARBAGE_DISTANCE_SHARE {
        (10f64.powf(2.0 + 4.5 * unit(rng)) * 100.0) as i64
    } else {
        (miles * 100.0).round() as i64
    }
}
