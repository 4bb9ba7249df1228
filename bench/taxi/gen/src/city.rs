//! New York City as the generator sees it: a few dozen 2010 census tracts around the places taxi
//! trips start and end (Midtown, the Upper East and West Sides, downtown, Harlem, the airports,
//! the parts of Brooklyn, Queens and the Bronx that green cabs serve), each with the ten location
//! columns of the public data set and a centre point. Points are drawn around a tract's centre,
//! so the coordinates, the EWKB points and the location columns of a row agree.

use crate::choice::WeightedChoice;

pub struct Tract {
    pub nyct2010_gid: i64,
    pub ctlabel: &'static str,
    pub borocode: i64,
    pub ct2010: &'static str,
    pub boroct2010: &'static str,
    pub cdeligibil: &'static str,
    pub ntacode: &'static str,
    pub ntaname: &'static str,
    pub puma: &'static str,
    pub lon: f64,
    pub lat: f64,
    /// Relative weights of the tract as a yellow-cab pick-up, a green-cab pick-up (green cabs may
    /// not pick up in Manhattan below 110th Street) and a drop-off.
    yellow_pickup_weight: f64,
    green_pickup_weight: f64,
    dropoff_weight: f64,
}

impl Tract {
    pub fn boroname(&self) -> &'static str {
        match self.borocode {
            1 => "Manhattan",
            2 => "Bronx",
            3 => "Brooklyn",
            4 => "Queens",
            5 => "Staten Island",
            other => panic!("borough code {other} does not exist"),
        }
    }
}

/// One row of the table below; positional so that the table stays one line per tract.
#[rustfmt::skip]
#[allow(clippy::too_many_arguments)]
const fn tract(
    nyct2010_gid: i64, ctlabel: &'static str, borocode: i64, ct2010: &'static str,
    boroct2010: &'static str, cdeligibil: &'static str, ntacode: &'static str,
    ntaname: &'static str, puma: &'static str, lon: f64, lat: f64, weights: [f64; 3],
) -> Tract {
    Tract {
        nyct2010_gid, ctlabel, borocode, ct2010, boroct2010, cdeligibil, ntacode, ntaname, puma,
        lon, lat, yellow_pickup_weight: weights[0], green_pickup_weight: weights[1],
        dropoff_weight: weights[2],
    }
}

pub const JFK: usize = 19;

#[rustfmt::skip]
pub static TRACTS: [Tract; 31] = [
    tract(1101, "96", 1, "009600", "1009600", "I", "MN17", "Midtown-Midtown South", "3807", -73.9797, 40.7585, [9.0, 0.0, 7.0]),
    tract(1113, "119", 1, "011900", "1011900", "I", "MN17", "Midtown-Midtown South", "3807", -73.9857, 40.7568, [8.0, 0.0, 6.0]),
    tract(1085, "84", 1, "008400", "1008400", "I", "MN17", "Midtown-Midtown South", "3807", -73.9890, 40.7500, [7.0, 0.0, 5.5]),
    tract(1092, "92", 1, "009200", "1009200", "I", "MN19", "Turtle Bay-East Midtown", "3808", -73.9745, 40.7535, [6.0, 0.0, 5.0]),
    tract(1070, "72", 1, "007200", "1007200", "I", "MN20", "Murray Hill-Kips Bay", "3808", -73.9780, 40.7455, [5.0, 0.0, 4.5]),
    tract(1056, "58", 1, "005800", "1005800", "I", "MN13", "Hudson Yards-Chelsea-Flatiron-Union Square", "3807", -73.9915, 40.7410, [6.5, 0.0, 5.0]),
    tract(1083, "81", 1, "008100", "1008100", "I", "MN13", "Hudson Yards-Chelsea-Flatiron-Union Square", "3807", -74.0010, 40.7465, [4.0, 0.0, 3.5]),
    tract(1130, "130", 1, "013000", "1013000", "I", "MN40", "Upper East Side-Carnegie Hill", "3805", -73.9600, 40.7745, [5.5, 0.0, 5.5]),
    tract(1118, "114.02", 1, "011402", "1011402", "I", "MN31", "Lenox Hill-Roosevelt Island", "3805", -73.9640, 40.7655, [5.0, 0.0, 5.0]),
    tract(1160, "159", 1, "015900", "1015900", "I", "MN12", "Upper West Side", "3806", -73.9775, 40.7835, [4.5, 0.0, 5.0]),
    tract(1168, "165", 1, "016500", "1016500", "I", "MN12", "Upper West Side", "3806", -73.9720, 40.7925, [3.0, 0.0, 3.5]),
    tract(1073, "73", 1, "007300", "1007300", "I", "MN23", "West Village", "3809", -74.0035, 40.7345, [4.5, 0.0, 4.0]),
    tract(1038, "38", 1, "003800", "1003800", "I", "MN22", "East Village", "3809", -73.9845, 40.7265, [4.0, 0.0, 4.0]),
    tract(1045, "45", 1, "004500", "1004500", "I", "MN24", "SoHo-TriBeCa-Civic Center-Little Italy", "3810", -74.0005, 40.7235, [3.5, 0.0, 3.5]),
    tract(1007, "7", 1, "000700", "1000700", "I", "MN25", "Battery Park City-Lower Manhattan", "3810", -74.0105, 40.7075, [3.0, 0.0, 3.0]),
    tract(1135, "135", 1, "013500", "1013500", "I", "MN15", "Clinton", "3807", -73.9915, 40.7640, [3.0, 0.0, 3.0]),
    tract(1222, "222", 1, "022200", "1022200", "E", "MN11", "Central Harlem South", "3803", -73.9485, 40.8045, [0.6, 6.0, 1.2]),
    tract(1188, "188", 1, "018800", "1018800", "E", "MN33", "East Harlem South", "3804", -73.9420, 40.7945, [0.5, 6.0, 1.0]),
    tract(1261, "261", 1, "026100", "1026100", "E", "MN36", "Washington Heights South", "3801", -73.9395, 40.8420, [0.2, 4.0, 0.6]),
    tract(2019, "716", 4, "071600", "4071600", "I", "QN98", "Airport", "4105", -73.7815, 40.6445, [1.2, 0.3, 1.0]),
    tract(1936, "331", 4, "033100", "4033100", "I", "QN98", "Airport", "4102", -73.8725, 40.7745, [1.8, 0.5, 1.3]),
    tract(1802, "63", 4, "006300", "4006300", "E", "QN70", "Astoria", "4101", -73.9215, 40.7640, [0.2, 7.0, 1.0]),
    tract(1741, "7", 4, "000700", "4000700", "E", "QN31", "Hunters Point-Sunnyside-West Maspeth", "4109", -73.9505, 40.7445, [0.2, 5.0, 0.8]),
    tract(1875, "285", 4, "028500", "4028500", "E", "QN28", "Jackson Heights", "4102", -73.8835, 40.7555, [0.1, 6.0, 0.7]),
    tract(1531, "551", 3, "055100", "3055100", "E", "BK73", "North Side-South Side", "4001", -73.9575, 40.7175, [0.4, 8.0, 1.3]),
    tract(1309, "9", 3, "000900", "3000900", "I", "BK38", "DUMBO-Vinegar Hill-Downtown Brooklyn-Boerum Hill", "4004", -73.9875, 40.6935, [0.4, 7.0, 1.2]),
    tract(1457, "157", 3, "015700", "3015700", "I", "BK37", "Park Slope-Gowanus", "4005", -73.9805, 40.6725, [0.2, 6.0, 1.0]),
    tract(1545, "245", 3, "024500", "3024500", "E", "BK75", "Bedford", "4003", -73.9555, 40.6875, [0.1, 6.5, 0.7]),
    tract(655, "63", 2, "006300", "2006300", "E", "BX63", "West Concourse", "3708", -73.9265, 40.8275, [0.1, 5.0, 0.5]),
    tract(620, "19", 2, "001900", "2001900", "E", "BX39", "Mott Haven-Port Morris", "3710", -73.9255, 40.8095, [0.1, 4.5, 0.5]),
    tract(2103, "3", 5, "000300", "5000300", "E", "SI22", "West New Brighton-New Brighton-St. George", "3903", -74.0775, 40.6435, [0.01, 0.1, 0.05]),
];

/// Half-widths, in degrees, of the (triangular) spread of points around a tract's centre:
/// about a quarter of a mile each way.
pub const SPREAD_LON_DEGREES: f64 = 0.006;
pub const SPREAD_LAT_DEGREES: f64 = 0.0045;
/// Miles per degree at New York's latitude.
pub const MILES_PER_LON_DEGREE: f64 = 52.4;
pub const MILES_PER_LAT_DEGREE: f64 = 69.0;

pub struct City {
    pub yellow_pickup: WeightedChoice,
    pub green_pickup: WeightedChoice,
    pub dropoff: WeightedChoice,
}

impl City {
    pub fn new() -> Self {
        assert_eq!(
            TRACTS[JFK].ctlabel, "716",
            "JFK must point at the airport's tract"
        );
        let weights = |f: fn(&Tract) -> f64| TRACTS.iter().map(f).collect::<Vec<_>>();
        City {
            yellow_pickup: WeightedChoice::new(&weights(|t| t.yellow_pickup_weight)),
            green_pickup: WeightedChoice::new(&weights(|t| t.green_pickup_weight)),
            dropoff: WeightedChoice::new(&weights(|t| t.dropoff_weight)),
        }
    }
}

/// Straight-line miles between two points given in degrees (flat-earth, fine at city scale).
pub fn miles_between(lon_a: f64, lat_a: f64, lon_b: f64, lat_b: f64) -> f64 {
    let dx = (lon_b - lon_a) * MILES_PER_LON_DEGREE;
    let dy = (lat_b - lat_a) * MILES_PER_LAT_DEGREE;
    (dx * dx + dy * dy).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tract_columns_fit_the_schema() {
        for t in &TRACTS {
            assert!(
                t.ctlabel.len() <= 10 && t.ntaname.len() <= 56,
                "{}",
                t.ntaname
            );
            assert_eq!(t.ct2010.len(), 6);
            assert_eq!(t.boroct2010, format!("{}{}", t.borocode, t.ct2010));
            assert_eq!(
                (t.cdeligibil.len(), t.ntacode.len(), t.puma.len()),
                (1, 4, 4)
            );
            assert!(t.boroname().len() <= 13);
            assert!((-74.3..-73.6).contains(&t.lon) && (40.5..41.0).contains(&t.lat));
            let texts = [
                t.ctlabel,
                t.ct2010,
                t.boroct2010,
                t.cdeligibil,
                t.ntacode,
                t.ntaname,
                t.puma,
            ];
            assert!(
                texts.iter().all(|s| !s.contains([',', '"', '\n'])),
                "{texts:?} need quoting"
            );
        }
    }
}
