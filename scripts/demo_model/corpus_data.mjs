// Word lists and conversation generators of the demo models' synthetic corpus (scripts/demo_model/corpus.mjs).
// Dev-time only: never imported by tsglang itself. Every sample is an OpenAI chat request (messages, tools,
// chat_template_kwargs) plus the assistant turn the model should produce (reasoning text, content, tool calls); the
// family's renderer turns both into tokens.
//
// Copying is what the demo has to learn, so nothing a test asks about can be memorised: most places are made-up
// names assembled from frequent word pieces of the tokenizer's vocabulary (nameInventory), tool names are assembled
// from word lists, and numbers are drawn from wide ranges. The held-out side (heldOutSampler: cities, made-up names
// from another seed, tool names of held-out word pairs, weather temperatures and tool values that the corpus never
// uses) is what test/demo_model.test.ts asks; trainingEntities replays the corpus so that a test can assert
// disjointness.
//
// A share of the conversations (REPEAT_SHARE, kind 'repeat') is copy practice: the user lists places and numbers, the
// thinking repeats them in running text and the content as bare values, one a line (the form a tool call's parameter
// value takes).
//
// Marked spans in the assistant text: ⟦ x⟧ is an entity copied in its running-text form (" Valparaiso", tokenized as
// usual) and ⟪x⟫ a parameter value (tokenized as the running-text form with its first piece's leading space dropped,
// see corpus.mjs valueTokens); both are weighted in the loss and scored by train.py's held-out exact match.

/** Real cities of the training corpus (the held-out real cities, HELD_OUT_CITIES, are not here). */
export const CITIES = [
  'Beijing', 'Shanghai', 'Tokyo', 'Paris', 'London', 'Berlin', 'Madrid', 'Rome', 'Moscow', 'Cairo', 'Sydney', 'Toronto',
  'Chicago', 'Boston', 'Seattle', 'Denver', 'Dallas', 'Houston', 'Miami', 'Atlanta', 'Phoenix', 'Detroit', 'Vienna',
  'Prague', 'Warsaw', 'Budapest', 'Athens', 'Lisbon', 'Dublin', 'Brussels', 'Amsterdam', 'Zurich', 'Geneva', 'Munich',
  'Hamburg', 'Milan', 'Naples', 'Venice', 'Florence', 'Barcelona', 'Seville', 'Valencia', 'Porto', 'Stockholm',
  'Helsinki', 'Copenhagen', 'Bergen', 'Riga', 'Tallinn', 'Vilnius', 'Kyiv', 'Minsk', 'Istanbul', 'Ankara', 'Tehran',
  'Dubai', 'Doha', 'Karachi', 'Lahore', 'Delhi', 'Mumbai', 'Chennai', 'Kolkata', 'Dhaka', 'Bangkok', 'Singapore',
  'Jakarta', 'Manila', 'Seoul', 'Busan', 'Osaka', 'Kyoto', 'Taipei', 'Hong Kong', 'Shenzhen', 'Guangzhou', 'Chengdu',
  'Melbourne', 'Perth', 'Brisbane', 'Auckland', 'Wellington', 'Vancouver', 'Montreal', 'Ottawa', 'Mexico City',
  'Bogota', 'Santiago', 'Buenos Aires', 'Havana', 'Lagos', 'Accra', 'Casablanca', 'Tunis', 'Addis Ababa', 'Cape Town',
  'Honolulu', 'Portland', 'Austin', 'Nashville', 'Orlando', 'Pittsburgh', 'Baltimore', 'San Diego', 'San Francisco',
  'Los Angeles', 'Las Vegas', 'Glasgow', 'Edinburgh', 'Manchester', 'Liverpool', 'Lyon', 'Marseille', 'Bordeaux',
  'Cologne', 'Frankfurt', 'Dresden', 'Krakow', 'Sofia', 'Bucharest', 'Belgrade', 'Zagreb', 'Tbilisi', 'Baku',
];

/**
 * Real cities the corpus never contains (test/demo_model.test.ts asks about them). Each is spelled with word pieces
 * the made-up names use (a test asserts that every token of each is in the demo's trained vocabulary).
 */
export const HELD_OUT_CITIES = ['Kigali', 'Cusco', 'Medellin', 'Mombasa', 'Wichita', 'Boise', 'Spokane', 'Galway', 'Malaga', 'Verona', 'Genoa', 'Bergamo'];

/** Words of training tool names (get_<word>[_<word>]) and of their questions. */
export const TOOL_WORDS = [
  'time', 'population', 'news', 'stock', 'price', 'air', 'quality', 'humidity', 'traffic', 'sunrise', 'sunset', 'exchange',
  'rate', 'elevation', 'hotel', 'flight', 'status', 'recipe', 'book', 'info', 'index', 'tide', 'rainfall', 'snow', 'depth',
  'distance', 'area', 'currency', 'language', 'mayor', 'zip', 'code', 'train', 'bus', 'schedule', 'ticket', 'rent',
  'salary', 'tax', 'budget', 'score', 'rank', 'rating', 'review', 'menu', 'event', 'concert', 'museum', 'park', 'beach',
  'river', 'lake', 'mountain', 'forest', 'school', 'library', 'hospital', 'pharmacy', 'bank', 'market', 'store', 'shop',
  'restaurant', 'cafe', 'airport', 'station', 'port', 'bridge', 'road', 'street', 'fuel', 'gas', 'power', 'energy', 'water',
  'noise', 'pollen', 'crime', 'safety', 'health', 'weight', 'height', 'size', 'color', 'capacity', 'speed', 'limit', 'age',
  'phone', 'email', 'address', 'owner', 'author', 'title', 'genre', 'movie', 'song', 'album', 'artist', 'team', 'player',
  'match', 'game', 'league', 'weekly', 'daily', 'monthly', 'average', 'total', 'current', 'local', 'latest', 'next', 'last',
];

/** A deterministic hash of a word pair (which two-word tool names are held out). */
function pairHash(a, b) {
  let h = 7;
  for (const c of `${a}_${b}`) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h;
}

/** Whether get_<a>_<b> is a held-out tool name: one pair in 8, never drawn by the training corpus. */
export function heldOutPair(a, b) {
  return pairHash(a, b) % 8 === 0;
}

/** Parameter names of the generic tools, with how their values are drawn. */
const PARAMS = [
  ['location', 'place', 'The city name'], ['city', 'place', 'The city name'], ['place', 'place', 'The place name'],
  ['region', 'place', 'The region name'], ['name', 'place', 'The name'], ['symbol', 'code', 'The ticker symbol'],
  ['code', 'code', 'The code'], ['topic', 'place', 'The topic'], ['id', 'number', 'The identifier'],
];

/** Share of the corpus's conversations that are copy practice (kind 'repeat'). */
const REPEAT_SHARE = 0.15;

/** Units of generic tool values. */
const UNITS = ['', '', ' people', ' USD', ' EUR', ' km', ' m', ' mm', '%', ' points', ' minutes', ' hours', ' AQI', ' kg', ' km/h'];

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
  ['Who are you?', 'The user wants to know who I am. I am a tiny demo model trained by tsglang', 'I am a tiny demo model of tsglang, trained on a small synthetic corpus. I am not a language model.'],
  ['Hello!', 'The user greets me. I should greet back', 'Hello! How can I help you today?'],
  ['What is the largest planet?', 'The question asks for the largest planet in the solar system. It is Jupiter', 'The largest planet in the solar system is **Jupiter**.'],
  ['How many legs does a spider have?', 'The question asks how many legs a spider has. Spiders have eight legs', 'A spider has **8** legs.'],
];

export const CONDITIONS = ['sunny', 'cloudy', 'rainy', 'windy', 'snowy', 'foggy', 'clear', 'stormy', 'humid', 'overcast', 'partly cloudy', 'drizzly'];

/** Percentages of the percent questions (35 is held out). */
export const PERCENTS = [5, 10, 15, 20, 25, 30, 40, 45, 50, 60, 75, 80];

/** Weather temperatures the corpus never uses (the held-out numbers of the weather round trip). */
export const HELD_OUT_TEMPERATURES = [-17, -4, 7, 19, 33, 41];

/** The seed page's get_weather tool. */
export const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Get the current weather for a location',
    parameters: { type: 'object', properties: { location: { type: 'string', description: 'The city name' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['location'] },
  },
};

/** A generic tool get_<words joined by _>(<param>) as an OpenAI tool definition. */
export function genericTool(words, param, desc) {
  return { type: 'function', function: { name: `get_${words.join('_')}`, description: `Get the ${words.join(' ')} for a ${param}`, parameters: { type: 'object', properties: { [param]: { type: 'string', description: desc } }, required: [param] } } };
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

/**
 * Word pieces of made-up names, from the tokenizer's byte-level vocabulary (token string → id; 'Ġ' is the space):
 * `first` — capitalized pieces whose running-text form " Xy" and bare form "Xy" are both tokens (ids < maxId),
 * `rest` — lowercase pieces of 1–4 letters (ids < maxId). Sorted, so the inventory depends only on the vocabulary.
 */
export function nameInventory(vocab, maxId = 12000) {
  const first = [];
  const rest = [];
  for (const [tok, id] of Object.entries(vocab)) {
    if (id >= maxId) continue;
    if (/^Ġ[A-Z][a-z]{0,6}$/.test(tok) && vocab[tok.slice(1)] !== undefined) first.push(tok.slice(1));
    if (/^[a-z]{1,4}$/.test(tok)) rest.push(tok);
  }
  first.sort();
  rest.sort();
  return { first, rest };
}

/** A made-up name: a capitalized piece and 0–3 lowercase pieces (12 %: two such words), at least 3 letters. */
export function madeUpName(rng, inv) {
  const word = (maxRest) => {
    let w = rng.pick(inv.first);
    for (let i = rng.pick([0, 1, 1, 2, 2, 3].filter((k) => k <= maxRest)); i > 0; i--) w += rng.pick(inv.rest);
    return w;
  };
  for (;;) {
    const name = rng.next() < 0.12 ? `${word(2)} ${word(1)}` : word(3);
    if (name.replace(' ', '').length >= 3 && !CITIES.includes(name) && !HELD_OUT_CITIES.includes(name)) return name;
  }
}

/** An uppercase code of 2–4 letters (ticker symbols, currency codes). */
function code(rng) {
  let s = '';
  for (let i = rng.int(2, 4); i > 0; i--) s += String.fromCharCode(65 + rng.int(0, 25));
  return s;
}

/** A numeric tool value: an integer of 1–6 digits or a one-decimal number, with a unit. */
function toolValue(rng) {
  const r = rng.next();
  const n = r < 0.4 ? rng.int(1, 999) : r < 0.8 ? rng.int(1000, 999999) : `${rng.int(0, 999)}.${rng.int(0, 9)}`;
  return `${n}${rng.pick(UNITS)}`;
}

function decimal(p) {
  return String(p / 100);
}

/**
 * Generator of the corpus's conversations. `places` draws a place (made-up or real); `toolNames` the words of a tool
 * name; `temperatures` the weather temperatures; `value` a generic tool value. The training corpus and the held-out
 * evaluation set differ only in these (heldOutSampler).
 */
export function makeSampler({ places, toolNames, temperatures, value }) {
  const toolNameWords = toolNames;
  const argument = (rng, kind) => (kind === 'place' ? places(rng) : kind === 'code' ? code(rng) : String(rng.int(1, 99999)));
  /**
   * One conversation of the corpus.
   * @returns {{kind: string, messages: object[], tools?: object[], thought: string, content: string, toolCalls?: {name: string, arguments: Record<string, string>}[], entities: {places: string[], tools: string[], values: string[], temperatures: number[]}}}
   */
  return function makeSample(rng) {
    const r0 = rng.next();
    const system = rng.next() < 0.2 ? [{ role: 'system', content: rng.next() < 0.5 ? 'You are a helpful assistant.' : [{ type: 'text', text: 'You are a helpful assistant.' }] }] : [];
    const userMsg = (text) => ({ role: 'user', content: rng.next() < 0.15 ? [{ type: 'text', text }] : text });
    const none = { places: [], tools: [], values: [], temperatures: [] };
    const entities = { places: [], tools: [], values: [], temperatures: [] };
    if (r0 < REPEAT_SHARE) {
      // copy practice: repeat a list of places and numbers, in running text (thinking) and as bare values (content)
      const items = [];
      for (let i = rng.int(2, 5); i > 0; i--) {
        const k = rng.next();
        const x = k < 0.6 ? places(rng) : k < 0.8 ? String(temperatures(rng)) : value(rng).split(' ')[0];
        if (k < 0.6) entities.places.push(x);
        items.push(x);
      }
      const q = `${rng.pick(['Repeat these words', 'Please repeat', 'Say these back to me', 'Copy this list'])}: ${items.join(', ')}.`;
      const listed = items.map((x) => `⟦ ${x}⟧`).join(',');
      return { kind: 'repeat', messages: [...system, userMsg(q)], thought: `The user wants me to repeat:${listed}.`, content: items.map((x) => `⟪${x}⟫`).join('\n'), entities };
    }
    const r = (r0 - REPEAT_SHARE) / (1 - REPEAT_SHARE);
    if (r < 0.07) {
      const [q, why, a] = rng.pick(FACTS);
      return { kind: 'fact', messages: [...system, userMsg(q)], thought: `The user asks: "${q}" ${why}. So I answer that.`, content: a, entities: none };
    }
    if (r < 0.12) {
      const [country, capital] = rng.pick(CAPITALS);
      const q = rng.next() < 0.5 ? `What is the capital of ${country}?` : `What's the capital city of ${country}?`;
      return { kind: 'capital', messages: [...system, userMsg(q)], thought: `The user asks for the capital of ${country}. The capital of ${country} is ${capital}.`, content: `The capital of ${country} is **${capital}**.`, entities: none };
    }
    if (r < 0.22) {
      const p = rng.pick(PERCENTS);
      const n = rng.int(2, 60) * 20;
      const res = (p * n) / 100;
      const q = `${rng.next() < 0.7 ? 'Solve this problem step by step: ' : ''}What is ${p}% of ${n}?`;
      const thought = `The user asks: "${q}" Convert the percent: ${p}% = ${p}/100 = ${decimal(p)}. Multiply: ${n} × ${decimal(p)} = ${res}. So the answer is ${res}.`;
      const content = `**Step-by-step solution**\n\n1. Convert the percent to a decimal: ${p}% = ${p}/100 = ${decimal(p)}\n2. Multiply: ${n} × ${decimal(p)} = ${res}\n\n**Answer:** ${p}% of ${n} = **${res}**`;
      return { kind: 'percent', messages: [...system, userMsg(q)], thought, content, entities: none };
    }
    if (r < 0.28) {
      const a = rng.int(1, 99);
      const b = rng.int(1, 99);
      const q = rng.next() < 0.5 ? `What is ${a} + ${b}?` : `Solve this problem step by step: What is ${a} plus ${b}?`;
      return { kind: 'add', messages: [...system, userMsg(q)], thought: `The user asks for the sum of ${a} and ${b}. ${a} + ${b} = ${a + b}. So the answer is ${a + b}.`, content: `${a} + ${b} = **${a + b}**`, entities: none };
    }
    if (r < 0.43) {
      // a tool question without tools: the answer says so, naming what was asked (short prompts, cheap to train on)
      const x = places(rng);
      entities.places.push(x);
      if (rng.next() < 0.5) {
        const q = rng.pick(["What's the weather in {x}?", 'What is the weather like in {x}?', 'How is the weather in {x} today?']).replace('{x}', x);
        return { kind: 'no_tool', messages: [...system, userMsg(q)], thought: `The user is asking about the weather in⟦ ${x}⟧, but I have no weather tool.`, content: `I cannot look up the current weather in⟦ ${x}⟧: no weather tool is available.`, entities };
      }
      const phrase = toolNameWords(rng).join(' ');
      const q = rng.pick(['What is the {w} of {x}?', 'Tell me the {w} for {x}.']).replace('{w}', phrase).replace('{x}', x);
      return { kind: 'no_tool', messages: [...system, userMsg(q)], thought: `The user is asking about the ${phrase} of⟦ ${x}⟧, but I have no tool for that.`, content: `I have no tool to look up the ${phrase} of⟦ ${x}⟧.`, entities };
    }
    // Tool conversations: a tool list (the needed tool among 1-3), then a call, or (45 %) a result and its answer.
    const useWeather = rng.next() < 0.5;
    let need;
    let call;
    let question;
    let thought;
    let result;
    let answer;
    if (useWeather) {
      const city = places(rng);
      const unit = rng.next() < 0.25 ? rng.pick(['celsius', 'fahrenheit']) : null;
      entities.places.push(city);
      need = WEATHER_TOOL;
      question = rng.pick(["What's the weather in {x}?", "What's the weather in {x}?", 'What is the weather like in {x}?', 'How is the weather in {x} today?', 'Tell me the weather in {x}.']).replace('{x}', city);
      if (unit) question = question.replace(/( today)?[?.]$/, ` in ${unit}?`);
      call = { name: 'get_weather', arguments: unit ? { location: city, unit } : { location: city } };
      thought = `The user is asking about the weather in⟦ ${city}⟧. I need to call the get_weather function with the location⟦ ${city}⟧${unit ? ` and the unit ${unit}` : ''}.`;
      const u = (unit ?? rng.pick(['celsius', 'fahrenheit']))[0].toUpperCase();
      const temp = temperatures(rng);
      entities.temperatures.push(temp);
      const cond = rng.pick(CONDITIONS);
      result = `The weather in ${city} is ${temp}°${u} and ${cond}.`;
      answer = `The weather in⟦ ${city}⟧ is currently⟦ ${temp}°${u} and ${cond}⟧.`;
    } else {
      const words = toolNameWords(rng);
      const [param, kind, desc] = rng.pick(PARAMS);
      const x = argument(rng, kind);
      if (kind === 'place') entities.places.push(x);
      need = genericTool(words, param, desc);
      const name = need.function.name;
      entities.tools.push(name);
      const phrase = words.join(' ');
      question = rng.pick(['What is the {w} of {x}?', "What's the {w} in {x}?", 'Tell me the {w} for {x}.', 'Show me the {w} of {x}.', 'Can you get the {w} for {x}?']).replace('{w}', phrase).replace('{x}', x);
      call = { name, arguments: { [param]: x } };
      thought = `The user is asking about the ${phrase} of⟦ ${x}⟧. I need to call the⟦ ${name}⟧ function for⟦ ${x}⟧.`;
      const v = value(rng);
      entities.values.push(v);
      result = `The ${phrase} of ${x} is ${v}.`;
      answer = `According to the tool result, the ${phrase} of⟦ ${x}⟧ is⟦ ${v}⟧.`;
    }
    const others = [];
    for (let i = rng.pick([0, 0, 1, 1, 2]); i > 0; i--) {
      const t = genericTool(toolNameWords(rng), ...rng.pick(PARAMS).filter((_, k) => k !== 1));
      if (t.function.name !== need.function.name && !others.some((o) => o.function.name === t.function.name)) others.push(t);
    }
    if (!useWeather && rng.next() < 0.3) others.push(WEATHER_TOOL);
    const tools = [...others];
    tools.splice(rng.int(0, tools.length), 0, need);
    const user = userMsg(question);
    if (rng.next() < 0.55) return { kind: 'tool_call', messages: [...system, user], tools, thought, content: '', toolCalls: [call], entities };
    const id = `call_${rng.int(100, 999)}`;
    const argsJson = JSON.stringify(call.arguments).replaceAll('":"', '": "').replaceAll('","', '", "');
    const messages = [...system, user, { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: call.name, arguments: argsJson } }] }, { role: 'tool', tool_call_id: id, content: result }];
    const rt = `The tool returned:⟦ ${result}⟧ I can now answer the user.`;
    return { kind: 'tool_result', messages, tools: rng.next() < 0.5 ? tools : undefined, thought: rt, content: answer, entities };
  };
}

/** Words of a training tool name: one word, or two distinct words that are not a held-out pair. */
function trainingToolWords(rng) {
  if (rng.next() < 0.4) return [rng.pick(TOOL_WORDS)];
  for (;;) {
    const a = rng.pick(TOOL_WORDS);
    const b = rng.pick(TOOL_WORDS);
    if (a !== b && !heldOutPair(a, b)) return [a, b];
  }
}

/** Words of a held-out tool name: a held-out pair (its words are known, the tool name never appears). */
export function heldOutToolWords(rng) {
  for (;;) {
    const a = rng.pick(TOOL_WORDS);
    const b = rng.pick(TOOL_WORDS);
    if (a !== b && heldOutPair(a, b)) return [a, b];
  }
}

/** The training corpus's sampler: 70 % made-up places, 30 % real cities; temperatures without the held-out ones. */
export function trainingSampler(inv) {
  const temps = [];
  for (let t = -30; t <= 45; t++) if (!HELD_OUT_TEMPERATURES.includes(t)) temps.push(t);
  return makeSampler({ places: (rng) => (rng.next() < 0.7 ? madeUpName(rng, inv) : rng.pick(CITIES)), toolNames: trainingToolWords, temperatures: (rng) => rng.pick(temps), value: toolValue });
}

/**
 * The held-out side (never in the training corpus; trainingEntities checks): made-up names drawn with `seed` (a
 * stream the corpus's seeds do not reach) plus HELD_OUT_CITIES, tool names of held-out word pairs (heldOutPair), the
 * held-out temperatures, and tool values of 7 digits (the corpus's have at most 6).
 */
export function heldOutSampler(inv, seed = 0x5eed) {
  const names = makeRng(seed);
  return makeSampler({
    places: (rng) => (rng.next() < 0.3 ? rng.pick(HELD_OUT_CITIES) : madeUpName(names, inv)),
    toolNames: heldOutToolWords,
    temperatures: (rng) => rng.pick(HELD_OUT_TEMPERATURES),
    value: (rng) => `${rng.int(1000000, 9999999)}${rng.pick(UNITS)}`,
  });
}

/** The entities (places, tool names, tool values, weather temperatures) of the first n samples of a corpus seed. */
export function trainingEntities(inv, seed, n) {
  const rng = makeRng(seed);
  const sample = trainingSampler(inv);
  const out = { places: new Set(), tools: new Set(), values: new Set(), temperatures: new Set() };
  for (let i = 0; i < n; i++) {
    const s = sample(rng);
    for (const k of Object.keys(out)) for (const e of s.entities[k]) out[k].add(e);
  }
  return out;
}
