/**
 * Demo geography: for the 50 states and DC, the EPA region, a relative weight
 * (roughly population, so Texas and California get the most facilities) and
 * two cities with county, coordinates and a ZIP code.
 */
interface City {
  city: string;
  county: string;
  lat: number;
  lon: number;
  zip: string;
}

export interface StateInfo {
  code: string;
  region: number;
  weight: number;
  cities: [City, City];
}

const c = (city: string, county: string, lat: number, lon: number, zip: string): City => ({ city, county, lat, lon, zip });

export const GEOGRAPHY: readonly StateInfo[] = [
  {
    code: 'AL',
    region: 4,
    weight: 5.1,
    cities: [c('Birmingham', 'Jefferson County', 33.52, -86.8, '35203'), c('Mobile', 'Mobile County', 30.69, -88.04, '36602')],
  },
  {
    code: 'AK',
    region: 10,
    weight: 0.7,
    cities: [
      c('Anchorage', 'Anchorage Municipality', 61.22, -149.9, '99501'),
      c('Fairbanks', 'Fairbanks North Star Borough', 64.84, -147.72, '99701'),
    ],
  },
  {
    code: 'AZ',
    region: 9,
    weight: 7.4,
    cities: [c('Phoenix', 'Maricopa County', 33.45, -112.07, '85003'), c('Tucson', 'Pima County', 32.22, -110.97, '85701')],
  },
  {
    code: 'AR',
    region: 6,
    weight: 3,
    cities: [c('Little Rock', 'Pulaski County', 34.75, -92.29, '72201'), c('Fort Smith', 'Sebastian County', 35.39, -94.4, '72901')],
  },
  {
    code: 'CA',
    region: 9,
    weight: 39,
    cities: [c('Los Angeles', 'Los Angeles County', 34.05, -118.24, '90012'), c('Fresno', 'Fresno County', 36.74, -119.79, '93721')],
  },
  {
    code: 'CO',
    region: 8,
    weight: 5.8,
    cities: [c('Denver', 'Denver County', 39.74, -104.99, '80202'), c('Pueblo', 'Pueblo County', 38.25, -104.61, '81003')],
  },
  {
    code: 'CT',
    region: 1,
    weight: 3.6,
    cities: [c('Hartford', 'Hartford County', 41.77, -72.67, '06103'), c('Bridgeport', 'Fairfield County', 41.19, -73.2, '06604')],
  },
  {
    code: 'DE',
    region: 3,
    weight: 1,
    cities: [c('Wilmington', 'New Castle County', 39.74, -75.55, '19801'), c('Dover', 'Kent County', 39.16, -75.52, '19901')],
  },
  {
    code: 'DC',
    region: 3,
    weight: 0.7,
    cities: [
      c('Washington', 'District of Columbia', 38.9, -77.04, '20001'),
      c('Washington', 'District of Columbia', 38.87, -76.98, '20019'),
    ],
  },
  {
    code: 'FL',
    region: 4,
    weight: 22,
    cities: [c('Jacksonville', 'Duval County', 30.33, -81.66, '32202'), c('Tampa', 'Hillsborough County', 27.95, -82.46, '33602')],
  },
  {
    code: 'GA',
    region: 4,
    weight: 11,
    cities: [c('Atlanta', 'Fulton County', 33.75, -84.39, '30303'), c('Savannah', 'Chatham County', 32.08, -81.09, '31401')],
  },
  {
    code: 'HI',
    region: 9,
    weight: 1.4,
    cities: [c('Honolulu', 'Honolulu County', 21.31, -157.86, '96813'), c('Hilo', 'Hawaii County', 19.72, -155.09, '96720')],
  },
  {
    code: 'ID',
    region: 10,
    weight: 1.9,
    cities: [c('Boise', 'Ada County', 43.62, -116.2, '83702'), c('Pocatello', 'Bannock County', 42.87, -112.45, '83201')],
  },
  {
    code: 'IL',
    region: 5,
    weight: 12.5,
    cities: [c('Chicago', 'Cook County', 41.88, -87.63, '60602'), c('Peoria', 'Peoria County', 40.69, -89.59, '61602')],
  },
  {
    code: 'IN',
    region: 5,
    weight: 6.8,
    cities: [c('Indianapolis', 'Marion County', 39.77, -86.16, '46204'), c('Gary', 'Lake County', 41.59, -87.35, '46402')],
  },
  {
    code: 'IA',
    region: 7,
    weight: 3.2,
    cities: [c('Des Moines', 'Polk County', 41.59, -93.62, '50309'), c('Cedar Rapids', 'Linn County', 41.98, -91.67, '52401')],
  },
  {
    code: 'KS',
    region: 7,
    weight: 2.9,
    cities: [c('Wichita', 'Sedgwick County', 37.69, -97.34, '67202'), c('Kansas City', 'Wyandotte County', 39.11, -94.63, '66101')],
  },
  {
    code: 'KY',
    region: 4,
    weight: 4.5,
    cities: [c('Louisville', 'Jefferson County', 38.25, -85.76, '40202'), c('Lexington', 'Fayette County', 38.04, -84.5, '40507')],
  },
  {
    code: 'LA',
    region: 6,
    weight: 4.6,
    cities: [
      c('Baton Rouge', 'East Baton Rouge Parish', 30.45, -91.19, '70801'),
      c('Lake Charles', 'Calcasieu Parish', 30.23, -93.22, '70601'),
    ],
  },
  {
    code: 'ME',
    region: 1,
    weight: 1.4,
    cities: [c('Portland', 'Cumberland County', 43.66, -70.26, '04101'), c('Bangor', 'Penobscot County', 44.8, -68.77, '04401')],
  },
  {
    code: 'MD',
    region: 3,
    weight: 6.2,
    cities: [c('Baltimore', 'Baltimore City', 39.29, -76.61, '21202'), c('Hagerstown', 'Washington County', 39.64, -77.72, '21740')],
  },
  {
    code: 'MA',
    region: 1,
    weight: 7,
    cities: [c('Boston', 'Suffolk County', 42.36, -71.06, '02108'), c('Worcester', 'Worcester County', 42.26, -71.8, '01608')],
  },
  {
    code: 'MI',
    region: 5,
    weight: 10,
    cities: [c('Detroit', 'Wayne County', 42.33, -83.05, '48226'), c('Grand Rapids', 'Kent County', 42.96, -85.67, '49503')],
  },
  {
    code: 'MN',
    region: 5,
    weight: 5.7,
    cities: [c('Minneapolis', 'Hennepin County', 44.98, -93.27, '55401'), c('Duluth', 'St. Louis County', 46.79, -92.1, '55802')],
  },
  {
    code: 'MS',
    region: 4,
    weight: 2.9,
    cities: [c('Jackson', 'Hinds County', 32.3, -90.18, '39201'), c('Gulfport', 'Harrison County', 30.37, -89.09, '39501')],
  },
  {
    code: 'MO',
    region: 7,
    weight: 6.2,
    cities: [c('St. Louis', 'St. Louis City', 38.63, -90.2, '63101'), c('Kansas City', 'Jackson County', 39.1, -94.58, '64106')],
  },
  {
    code: 'MT',
    region: 8,
    weight: 1.1,
    cities: [c('Billings', 'Yellowstone County', 45.78, -108.5, '59101'), c('Missoula', 'Missoula County', 46.87, -113.99, '59802')],
  },
  {
    code: 'NE',
    region: 7,
    weight: 2,
    cities: [c('Omaha', 'Douglas County', 41.26, -95.93, '68102'), c('Lincoln', 'Lancaster County', 40.81, -96.7, '68508')],
  },
  {
    code: 'NV',
    region: 9,
    weight: 3.2,
    cities: [c('Las Vegas', 'Clark County', 36.17, -115.14, '89101'), c('Reno', 'Washoe County', 39.53, -119.81, '89501')],
  },
  {
    code: 'NH',
    region: 1,
    weight: 1.4,
    cities: [c('Manchester', 'Hillsborough County', 42.99, -71.46, '03101'), c('Concord', 'Merrimack County', 43.21, -71.54, '03301')],
  },
  {
    code: 'NJ',
    region: 2,
    weight: 9.3,
    cities: [c('Newark', 'Essex County', 40.74, -74.17, '07102'), c('Camden', 'Camden County', 39.93, -75.12, '08102')],
  },
  {
    code: 'NM',
    region: 6,
    weight: 2.1,
    cities: [c('Albuquerque', 'Bernalillo County', 35.08, -106.65, '87102'), c('Farmington', 'San Juan County', 36.73, -108.22, '87401')],
  },
  {
    code: 'NY',
    region: 2,
    weight: 20,
    cities: [c('Buffalo', 'Erie County', 42.89, -78.88, '14202'), c('Albany', 'Albany County', 42.65, -73.76, '12207')],
  },
  {
    code: 'NC',
    region: 4,
    weight: 10.7,
    cities: [c('Charlotte', 'Mecklenburg County', 35.23, -80.84, '28202'), c('Wilmington', 'New Hanover County', 34.23, -77.94, '28401')],
  },
  {
    code: 'ND',
    region: 8,
    weight: 0.8,
    cities: [c('Bismarck', 'Burleigh County', 46.81, -100.78, '58501'), c('Fargo', 'Cass County', 46.88, -96.79, '58102')],
  },
  {
    code: 'OH',
    region: 5,
    weight: 11.8,
    cities: [c('Cleveland', 'Cuyahoga County', 41.5, -81.69, '44113'), c('Toledo', 'Lucas County', 41.65, -83.54, '43604')],
  },
  {
    code: 'OK',
    region: 6,
    weight: 4,
    cities: [c('Tulsa', 'Tulsa County', 36.15, -95.99, '74103'), c('Oklahoma City', 'Oklahoma County', 35.47, -97.52, '73102')],
  },
  {
    code: 'OR',
    region: 10,
    weight: 4.2,
    cities: [c('Portland', 'Multnomah County', 45.52, -122.68, '97204'), c('Eugene', 'Lane County', 44.05, -123.09, '97401')],
  },
  {
    code: 'PA',
    region: 3,
    weight: 13,
    cities: [c('Pittsburgh', 'Allegheny County', 40.44, -80.0, '15222'), c('Philadelphia', 'Philadelphia County', 39.95, -75.17, '19107')],
  },
  {
    code: 'RI',
    region: 1,
    weight: 1.1,
    cities: [c('Providence', 'Providence County', 41.82, -71.41, '02903'), c('Warwick', 'Kent County', 41.7, -71.42, '02886')],
  },
  {
    code: 'SC',
    region: 4,
    weight: 5.3,
    cities: [c('Charleston', 'Charleston County', 32.78, -79.93, '29401'), c('Columbia', 'Richland County', 34.0, -81.03, '29201')],
  },
  {
    code: 'SD',
    region: 8,
    weight: 0.9,
    cities: [c('Sioux Falls', 'Minnehaha County', 43.54, -96.73, '57104'), c('Rapid City', 'Pennington County', 44.08, -103.23, '57701')],
  },
  {
    code: 'TN',
    region: 4,
    weight: 7,
    cities: [c('Memphis', 'Shelby County', 35.15, -90.05, '38103'), c('Nashville', 'Davidson County', 36.16, -86.78, '37201')],
  },
  {
    code: 'TX',
    region: 6,
    weight: 30,
    cities: [c('Houston', 'Harris County', 29.76, -95.37, '77002'), c('Beaumont', 'Jefferson County', 30.08, -94.13, '77701')],
  },
  {
    code: 'UT',
    region: 8,
    weight: 3.4,
    cities: [c('Salt Lake City', 'Salt Lake County', 40.76, -111.89, '84101'), c('Ogden', 'Weber County', 41.22, -111.97, '84401')],
  },
  {
    code: 'VT',
    region: 1,
    weight: 0.6,
    cities: [c('Burlington', 'Chittenden County', 44.48, -73.21, '05401'), c('Rutland', 'Rutland County', 43.61, -72.97, '05701')],
  },
  {
    code: 'VA',
    region: 3,
    weight: 8.7,
    cities: [c('Richmond', 'Richmond City', 37.54, -77.44, '23219'), c('Norfolk', 'Norfolk City', 36.85, -76.29, '23510')],
  },
  {
    code: 'WA',
    region: 10,
    weight: 7.8,
    cities: [c('Seattle', 'King County', 47.61, -122.33, '98101'), c('Tacoma', 'Pierce County', 47.25, -122.44, '98402')],
  },
  {
    code: 'WV',
    region: 3,
    weight: 1.8,
    cities: [c('Charleston', 'Kanawha County', 38.35, -81.63, '25301'), c('Wheeling', 'Ohio County', 40.06, -80.72, '26003')],
  },
  {
    code: 'WI',
    region: 5,
    weight: 5.9,
    cities: [c('Milwaukee', 'Milwaukee County', 43.04, -87.91, '53202'), c('Green Bay', 'Brown County', 44.51, -88.01, '54301')],
  },
  {
    code: 'WY',
    region: 8,
    weight: 0.6,
    cities: [c('Cheyenne', 'Laramie County', 41.14, -104.82, '82001'), c('Casper', 'Natrona County', 42.87, -106.31, '82601')],
  },
];

export const REGION_BY_STATE: ReadonlyMap<string, number> = new Map(GEOGRAPHY.map((s) => [s.code, s.region]));
