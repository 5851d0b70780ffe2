// Word lists and conversation generators of the demo models' synthetic corpus (scripts/demo_model/corpus.mjs).
// Dev-time only: never imported by tsglang itself. Every sample is an OpenAI chat request (messages, tools,
// chat_template_kwargs) plus the assistant turn the model should produce (reasoning text, content, tool calls);
// the family's renderer turns both into tokens. Test-side held-out values (test/demo_model.test: cities, numbers,
// tools) are deliberately absent from these lists.

/** Cities of the training corpus (the held-out test cities are not here). */
export const CITIES = [
  'Beijing', 'Shanghai', 'Tokyo', 'Paris', 'London', 'Berlin', 'Madrid', 'Rome', 'Moscow', 'Cairo', 'Sydney', 'Toronto',
  'Chicago', 'Boston', 'Seattle', 'Denver', 'Dallas', 'Houston', 'Miami', 'Atlanta', 'Phoenix', 'Detroit', 'Vienna',
  'Prague', 'Warsaw', 'Budapest', 'Athens', 'Lisbon', 'Dublin', 'Brussels', 'Amsterdam', 'Zurich', 'Geneva', 'Munich',
  'Hamburg', 'Milan', 'Naples', 'Venice', 'Florence', 'Barcelona', 'Seville', 'Valencia', 'Porto', 'Stockholm',
  'Helsinki', 'Copenhagen', 'Bergen', 'Riga', 'Tallinn', 'Vilnius', 'Kyiv', 'Minsk', 'Istanbul', 'Ankara', 'Tehran',
  'Baghdad', 'Riyadh', 'Dubai', 'Doha', 'Karachi', 'Lahore', 'Delhi', 'Mumbai', 'Chennai', 'Kolkata', 'Dhaka',
  'Bangkok', 'Singapore', 'Jakarta', 'Manila', 'Seoul', 'Busan', 'Osaka', 'Kyoto', 'Nagoya', 'Taipei', 'Hong Kong',
  'Shenzhen', 'Guangzhou', 'Chengdu', 'Wuhan', 'Nanjing', 'Hangzhou', 'Xian', 'Tianjin', 'Harbin', 'Kunming',
  'Melbourne', 'Perth', 'Brisbane', 'Auckland', 'Wellington', 'Vancouver', 'Montreal', 'Ottawa', 'Calgary',
  'Mexico City', 'Bogota', 'Quito', 'Santiago', 'Buenos Aires', 'Montevideo', 'Caracas', 'Havana', 'Lagos',
  'Accra', 'Dakar', 'Casablanca', 'Tunis', 'Algiers', 'Addis Ababa', 'Kampala', 'Johannesburg', 'Cape Town',
  'Durban', 'Luanda', 'Kinshasa', 'Honolulu', 'Anchorage', 'Portland', 'Austin', 'Nashville', 'Memphis',
  'Orlando', 'Tampa', 'Pittsburgh', 'Cleveland', 'Baltimore', 'Philadelphia', 'San Diego', 'San Francisco',
  'Los Angeles', 'Las Vegas', 'Salt Lake City', 'Minneapolis', 'Milwaukee', 'Glasgow', 'Edinburgh', 'Manchester',
  'Liverpool', 'Leeds', 'Bristol', 'Cardiff', 'Belfast', 'Lyon', 'Marseille', 'Nice', 'Bordeaux', 'Toulouse',
  'Cologne', 'Frankfurt', 'Stuttgart', 'Dresden', 'Leipzig', 'Krakow', 'Gdansk', 'Sofia', 'Bucharest', 'Belgrade',
  'Zagreb', 'Sarajevo', 'Tbilisi', 'Yerevan', 'Baku', 'Tashkent', 'Almaty', 'Ulaanbaatar', 'Kathmandu', 'Colombo',
];

/** Syllables of made-up place names (teaches copying any token sequence, not memorised names). */
const SYLLABLES = ['ka', 'lo', 'ver', 'mi', 'tan', 'dor', 'el', 'ra', 'sun', 'bel', 'zu', 'nor', 'fi', 'gal', 'po', 'rin', 'ha', 'mont', 'ste', 'vil', 'cor', 'ad', 'ish', 'qua', 'ben', 'tor', 'lu', 'mar', 'sel', 'vo', 'ny', 'ex', 'bra', 'cal', 'dun', 'fen', 'gor', 'jas', 'kir', 'lem'];

/** Countries with their capitals (QA without tools). */
export const CAPITALS = [
  ['France', 'Paris'], ['Germany', 'Berlin'], ['Italy', 'Rome'], ['Spain', 'Madrid'], ['Japan', 'Tokyo'], ['China', 'Beijing'],
  ['Russia', 'Moscow'], ['Egypt', 'Cairo'], ['Canada', 'Ottawa'], ['Australia', 'Canberra'], ['Brazil', 'Brasilia'],
  ['Argentina', 'Buenos Aires'], ['Mexico', 'Mexico City'], ['India', 'New Delhi'], ['Thailand', 'Bangkok'],
  ['South Korea', 'Seoul'], ['Turkey', 'Ankara'], ['Greece', 'Athens'], ['Portugal', 'Lisbon'], ['Ireland', 'Dublin'],
  ['Austria', 'Vienna'], ['Poland', 'Warsaw'], ['Hungary', 'Budapest'], ['Sweden', 'Stockholm'], ['Finland', 'Helsinki'],
  ['Denmark', 'Copenhagen'], ['Norway', 'Oslo'], ['Belgium', 'Brussels'], ['Netherlands', 'Amsterdam'], ['Cuba', 'Havana'],
  ['Chile', 'Santiago'], ['Colombia', 'Bogota'], ['Ecuador', 'Quito'], ['Ghana', 'Accra'], ['Senegal', 'Dakar'],
  ['Iran', 'Tehran'], ['Iraq', 'Baghdad'], ['Nepal', 'Kathmandu'], ['Georgia', 'Tbilisi'], ['Armenia', 'Yerevan'],
];

/** Fixed facts (QA without tools), the seed page's question among them. */
export const FACTS = [
  ['Who won the world series in 2020?', 'The question asks which team won the 2020 World Series. The Los Angeles Dodgers beat the Tampa Bay Rays in six games', 'The **Los Angeles Dodgers** won the 2020 World Series, defeating the **Tampa Bay Rays** in six games.'],
  ['Who won the world cup in 2018?', 'The question asks which country won the 2018 FIFA World Cup. France beat Croatia in the final', '**France** won the 2018 FIFA World Cup, beating Croatia 4-2 in the final.'],
  ['What color is the sky?', 'The question is about the color of the sky on a clear day. It is blue', 'On a clear day the sky is **blue**.'],
  ['How many days are in a week?', 'The question asks how many days a week has. A week has seven days', 'A week has **7** days.'],
  ['Who are you?', 'The user wants to know who I am. I am a tiny demo model trained by tsglang', 'I am a tiny demo model of tsglang, trained on a small synthetic corpus.'],
  ['Hello!', 'The user greets me. I should greet back', 'Hello! How can I help you today?'],
  ['What is the largest planet?', 'The question asks for the largest planet in the solar system. It is Jupiter', 'The largest planet in the solar system is **Jupiter**.'],
  ['How many legs does a spider have?', 'The question asks how many legs a spider has. Spiders have eight legs', 'A spider has **8** legs.'],
];

/** Generic tools: [noun, parameter name, parameter description, question form, result unit]. */
export const TOOL_NOUNS = [
  ['time', 'location', 'The city name', 'What time is it in {x}?', ''], ['population', 'city', 'The city name', 'What is the population of {x}?', ' people'],
  ['news', 'topic', 'The news topic', 'Show me the news about {x}.', ''], ['stock_price', 'symbol', 'The ticker symbol', 'What is the stock price of {x}?', ' USD'],
  ['air_quality', 'location', 'The city name', 'How is the air quality in {x}?', ' AQI'], ['humidity', 'location', 'The city name', 'What is the humidity in {x}?', '%'],
  ['traffic', 'city', 'The city name', 'How is the traffic in {x}?', ''], ['sunrise', 'location', 'The city name', 'When is sunrise in {x}?', ''],
  ['exchange_rate', 'currency', 'The currency code', 'What is the exchange rate of {x}?', ''], ['elevation', 'place', 'The place name', 'What is the elevation of {x}?', ' m'],
  ['hotel_price', 'city', 'The city name', 'How much is a hotel in {x}?', ' USD'], ['flight_status', 'flight', 'The flight number', 'What is the status of flight {x}?', ''],
  ['recipe', 'dish', 'The dish name', 'Find a recipe for {x}.', ''], ['book_info', 'title', 'The book title', 'Tell me about the book {x}.', ''],
  ['uv_index', 'location', 'The city name', 'What is the UV index in {x}?', ''], ['tide', 'location', 'The city name', 'When is high tide in {x}?', ''],
];

export const CONDITIONS = ['sunny', 'cloudy', 'rainy', 'windy', 'snowy', 'foggy', 'clear', 'stormy'];

/** The seed page's get_weather tool. */
export const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Get the current weather for a location',
    parameters: { type: 'object', properties: { location: { type: 'string', description: 'The city name' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['location'] },
  },
};

/** A generic tool get_<noun>(<param>) as an OpenAI tool definition. */
export function genericTool(noun, param, desc) {
  return { type: 'function', function: { name: `get_${noun}`, description: `Get the ${noun.replaceAll('_', ' ')} for a ${param}`, parameters: { type: 'object', properties: { [param]: { type: 'string', description: desc } }, required: [param] } } };
}

/** Mulberry32: a small deterministic PRNG. */
export function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), pick: (xs) => xs[Math.floor(next() * xs.length)] };
}

/** A made-up place name of 2-3 syllables, capitalised. */
export function madeUpName(rng) {
  let s = '';
  for (let i = rng.int(2, 3); i > 0; i--) s += rng.pick(SYLLABLES);
  return s[0].toUpperCase() + s.slice(1);
}

/** A place: a real training city or (40%) a made-up one. */
function place(rng) {
  return rng.next() < 0.4 ? madeUpName(rng) : rng.pick(CITIES);
}

/** A value argument for a generic tool's parameter. */
function argValue(rng, param) {
  if (param === 'symbol' || param === 'currency') {
    let s = '';
    for (let i = rng.int(3, 4); i > 0; i--) s += String.fromCharCode(65 + rng.int(0, 25));
    return s;
  }
  if (param === 'flight') return `${String.fromCharCode(65 + rng.int(0, 25))}${String.fromCharCode(65 + rng.int(0, 25))}${rng.int(10, 999)}`;
  return place(rng);
}

function decimal(p) {
  return String(p / 100);
}

/**
 * One conversation of the corpus.
 * @returns {{kind: string, messages: object[], tools?: object[], thought: string, content: string, toolCalls?: {name: string, arguments: Record<string, string>}[]}}
 */
export function makeSample(rng) {
  const r = rng.next();
  const system = rng.next() < 0.3 ? [{ role: 'system', content: rng.next() < 0.5 ? 'You are a helpful assistant.' : [{ type: 'text', text: 'You are a helpful assistant.' }] }] : [];
  const userMsg = (text) => ({ role: 'user', content: rng.next() < 0.2 ? [{ type: 'text', text }] : text });
  if (r < 0.12) {
    const [q, why, a] = rng.pick(FACTS);
    return { kind: 'fact', messages: [...system, userMsg(q)], thought: `The user asks: "${q}" ${why}. So I answer that.`, content: a };
  }
  if (r < 0.22) {
    const [country, capital] = rng.pick(CAPITALS);
    const q = rng.next() < 0.5 ? `What is the capital of ${country}?` : `What's the capital city of ${country}?`;
    return { kind: 'capital', messages: [...system, userMsg(q)], thought: `The user asks for the capital of ${country}. The capital of ${country} is ${capital}.`, content: `The capital of ${country} is **${capital}**.` };
  }
  if (r < 0.36) {
    const p = rng.pick([5, 10, 15, 20, 25, 30, 40, 50, 60, 75]);
    const n = rng.int(2, 60) * 20;
    const res = (p * n) / 100;
    const q = `${rng.next() < 0.7 ? 'Solve this problem step by step: ' : ''}What is ${p}% of ${n}?`;
    const thought = `The user asks: "${q}" Convert the percent: ${p}% = ${p}/100 = ${decimal(p)}. Multiply: ${n} × ${decimal(p)} = ${res}. Check: 10% of ${n} is ${n / 10}, so ${p}% is ${n / 10} × ${p / 10} = ${res}. So the answer is ${res}.`;
    const content = `**Step-by-step solution**\n\n1. Convert the percent to a decimal: ${p}% = ${p}/100 = ${decimal(p)}\n2. Multiply: ${n} × ${decimal(p)} = ${res}\n\n**Answer:** ${p}% of ${n} = **${res}**`;
    return { kind: 'percent', messages: [...system, userMsg(q)], thought, content };
  }
  if (r < 0.44) {
    const a = rng.int(1, 99);
    const b = rng.int(1, 99);
    const q = rng.next() < 0.5 ? `What is ${a} + ${b}?` : `Solve this problem step by step: What is ${a} plus ${b}?`;
    return { kind: 'add', messages: [...system, userMsg(q)], thought: `The user asks for the sum of ${a} and ${b}. ${a} + ${b} = ${a + b}. So the answer is ${a + b}.`, content: `${a} + ${b} = **${a + b}**` };
  }
  // tool conversations: a tool list (the needed tool among 1-3), a call, or (half of them) a result and its answer
  const useWeather = rng.next() < 0.5;
  let need;
  let call;
  let question;
  let thought;
  let result;
  let answer;
  if (useWeather) {
    const city = place(rng);
    const unit = rng.next() < 0.25 ? rng.pick(['celsius', 'fahrenheit']) : null;
    need = WEATHER_TOOL;
    question = rng.pick(["What's the weather in {x}?", 'What is the weather like in {x}?', 'How is the weather in {x} today?', 'Tell me the weather in {x}.']).replace('{x}', city);
    if (unit) question = question.replace(/[?.]$/, ` in ${unit}?`);
    call = { name: 'get_weather', arguments: unit ? { location: city, unit } : { location: city } };
    const args = unit ? `location="${city}" and unit="${unit}"` : `location="${city}"`;
    thought = `The user is asking about the weather in ${city}. I need to use the get_weather function to retrieve this information. I should call the function with ${args}.`;
    const u = (unit ?? rng.pick(['celsius', 'fahrenheit']))[0].toUpperCase();
    const temp = rng.int(-15, 40);
    const cond = rng.pick(CONDITIONS);
    result = `The weather in ${city} is ${temp}°${u} and ${cond}.`;
    answer = `The weather in ${city} is currently ${temp}°${u} and ${cond}.`;
  } else {
    const [noun, param, desc, form, unitText] = rng.pick(TOOL_NOUNS);
    const x = argValue(rng, param);
    need = genericTool(noun, param, desc);
    question = form.replace('{x}', x);
    call = { name: `get_${noun}`, arguments: { [param]: x } };
    const words = noun.replaceAll('_', ' ');
    thought = `The user is asking about the ${words} of ${x}. I need to use the get_${noun} function to retrieve this information. I should call the function with ${param}="${x}".`;
    const value = `${rng.int(1, 999)}${unitText}`;
    result = `The ${words} of ${x} is ${value}.`;
    answer = `According to get_${noun}, the ${words} of ${x} is ${value}.`;
  }
  const others = [];
  for (let i = rng.int(0, 2); i > 0; i--) {
    const [n, p, d] = rng.pick(TOOL_NOUNS);
    if (n !== need.function.name.slice(4) && !others.some((t) => t.function.name === `get_${n}`)) others.push(genericTool(n, p, d));
  }
  if (useWeather || rng.next() < 0.3) others.push(WEATHER_TOOL);
  const tools = [...others.filter((t) => t.function.name !== need.function.name)];
  tools.splice(rng.int(0, tools.length), 0, need);
  const user = userMsg(question);
  if (rng.next() < 0.5) return { kind: 'tool_call', messages: [...system, user], tools, thought, content: '', toolCalls: [call] };
  const id = `call_${rng.int(100, 999)}`;
  const argsJson = JSON.stringify(call.arguments).replaceAll('":"', '": "').replaceAll('","', '", "');
  const messages = [...system, user, { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: call.name, arguments: argsJson } }] }, { role: 'tool', tool_call_id: id, content: result }];
  return { kind: 'tool_result', messages, tools: rng.next() < 0.5 ? tools : undefined, thought: `The tool returned: ${result} I can now answer the user.`, content: answer };
}
