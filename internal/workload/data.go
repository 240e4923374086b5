package workload

import "strings"

// Value lists for the structured fields of a document.
var (
	types       = strings.Fields("article review product post comment event recipe listing question answer")
	statuses    = strings.Fields("published published published draft archived pending")
	langs       = strings.Fields("en en en en en-GB en-US en-AU")
	currencies  = strings.Fields("USD USD EUR EUR GBP JPY CAD AUD CHF SEK")
	domains     = strings.Fields("example.com example.org mail.example.net inbox.example.com post.example.io example.co.uk")
	streetKinds = strings.Fields("Street Street Road Avenue Lane Drive Way Court Place Boulevard Terrace")
	streets     = strings.Fields(`Oak Maple Pine Cedar Elm Birch Willow Chestnut Walnut Cherry Main High
		Church Park Mill Station Bridge Market Victoria King Queen Union Lake River Hill Spring
		Meadow Forest Garden Harbor Sunset Franklin Lincoln Washington Jefferson Madison Grant`)
	firstNames = strings.Fields(`James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth
		William Barbara Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Lisa
		Matthew Nancy Anthony Betty Mark Sandra Paul Ashley Steven Emily Andrew Donna Joshua
		Michelle Kevin Carol Brian Amanda George Melissa Timothy Deborah Ahmed Fatima Wei Mei
		Hiroshi Yuki Carlos Maria Luca Giulia Pierre Camille Lars Ingrid Olga Dmitri Priya Arjun
		Kwame Amara Sofia Mateo Noah Olivia Liam Emma Lucas Chloe Oliver Zoe`)
	lastNames = strings.Fields(`Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez
		Martinez Hernandez Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee
		Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King
		Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell
		Mitchell Carter Roberts Kim Chen Wang Tanaka Sato Rossi Bianchi Dubois Moreau Schmidt
		Muller Larsen Nilsen Ivanov Petrov Patel Singh Mensah Okafor Silva Santos`)
	tags = strings.Fields(`travel food coffee music books movies tech software hardware design
		health fitness running cycling hiking family kids pets garden home diy cooking baking
		wine beer budget luxury city nature beach mountains winter summer history art science
		education business finance startup career productivity photography gaming sports
		football news local review guide howto opinion announcement release update`)
)

// A city with its country code and approximate coordinates.
type city struct {
	name, country string
	lat, lon      float64
}

var cities = []city{
	{"London", "GB", 51.5072, -0.1276},
	{"Manchester", "GB", 53.4808, -2.2426},
	{"Edinburgh", "GB", 55.9533, -3.1883},
	{"Dublin", "IE", 53.3498, -6.2603},
	{"Paris", "FR", 48.8566, 2.3522},
	{"Lyon", "FR", 45.764, 4.8357},
	{"Berlin", "DE", 52.52, 13.405},
	{"Munich", "DE", 48.1351, 11.582},
	{"Hamburg", "DE", 53.5511, 9.9937},
	{"Amsterdam", "NL", 52.3676, 4.9041},
	{"Brussels", "BE", 50.8503, 4.3517},
	{"Madrid", "ES", 40.4168, -3.7038},
	{"Barcelona", "ES", 41.3874, 2.1686},
	{"Lisbon", "PT", 38.7223, -9.1393},
	{"Rome", "IT", 41.9028, 12.4964},
	{"Milan", "IT", 45.4642, 9.19},
	{"Vienna", "AT", 48.2082, 16.3738},
	{"Zurich", "CH", 47.3769, 8.5417},
	{"Stockholm", "SE", 59.3293, 18.0686},
	{"Oslo", "NO", 59.9139, 10.7522},
	{"Copenhagen", "DK", 55.6761, 12.5683},
	{"Helsinki", "FI", 60.1699, 24.9384},
	{"Warsaw", "PL", 52.2297, 21.0122},
	{"Prague", "CZ", 50.0755, 14.4378},
	{"Athens", "GR", 37.9838, 23.7275},
	{"New York", "US", 40.7128, -74.006},
	{"Boston", "US", 42.3601, -71.0589},
	{"Chicago", "US", 41.8781, -87.6298},
	{"Seattle", "US", 47.6062, -122.3321},
	{"San Francisco", "US", 37.7749, -122.4194},
	{"Los Angeles", "US", 34.0522, -118.2437},
	{"Austin", "US", 30.2672, -97.7431},
	{"Denver", "US", 39.7392, -104.9903},
	{"Miami", "US", 25.7617, -80.1918},
	{"Toronto", "CA", 43.6532, -79.3832},
	{"Vancouver", "CA", 49.2827, -123.1207},
	{"Montreal", "CA", 45.5019, -73.5674},
	{"Mexico City", "MX", 19.4326, -99.1332},
	{"Sao Paulo", "BR", -23.5505, -46.6333},
	{"Buenos Aires", "AR", -34.6037, -58.3816},
	{"Tokyo", "JP", 35.6762, 139.6503},
	{"Osaka", "JP", 34.6937, 135.5023},
	{"Seoul", "KR", 37.5665, 126.978},
	{"Singapore", "SG", 1.3521, 103.8198},
	{"Sydney", "AU", -33.8688, 151.2093},
	{"Melbourne", "AU", -37.8136, 144.9631},
	{"Auckland", "NZ", -36.8485, 174.7633},
	{"Cape Town", "ZA", -33.9249, 18.4241},
	{"Nairobi", "KE", -1.2921, 36.8219},
	{"Mumbai", "IN", 19.076, 72.8777},
}
