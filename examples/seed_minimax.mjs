// The MiniMax-M2.7 recipe page's Python examples (simple completion, streaming with thinking, tool calling, tool
// result round trip), translated to the openai npm client. Against the MiniMax-M2 demo model (the embedded default
// is still the random-weight model, which never closes its think section nor calls a tool):
//   node bin/tsglang.js make-tiny --preset demo --arch minimax-m2 --out /tmp/demo-minimax
//   node bin/tsglang.js serve --model-path /tmp/demo-minimax --tool-call-parser minimax-m2 --reasoning-parser minimax-append-think
//   node examples/seed_minimax.mjs [base_url]
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.argv[2] ?? 'http://localhost:30000/v1', apiKey: 'EMPTY' });
const model = 'MiniMaxAI/MiniMax-M2.7';

console.log('### Simple completion');
const response = await client.chat.completions.create({
  model,
  messages: [{ role: 'system', content: 'You are a helpful assistant.' }, { role: 'user', content: 'Who won the world series in 2020?' }],
  max_tokens: 1024,
});
console.log(response.choices[0].message.content);

console.log('\n### Streaming with thinking');
const stream = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'Solve this problem step by step: What is 15% of 240?' }], max_tokens: 2048, stream: true,
});
let inThink = false;
let thinkHeader = false;
let contentHeader = false;
let buffer = '';
for await (const chunk of stream) {
  const delta = chunk.choices?.[0]?.delta;
  if (!delta?.content) continue;
  buffer += delta.content;
  while (buffer) {
    if (inThink) {
      const end = buffer.indexOf('</think>');
      if (end !== -1) {
        process.stdout.write(buffer.slice(0, end));
        buffer = buffer.slice(end + '</think>'.length);
        inThink = false;
      } else {
        process.stdout.write(buffer);
        buffer = '';
      }
    } else {
      const start = buffer.indexOf('<think>');
      if (start !== -1) {
        const before = buffer.slice(0, start);
        if (before) {
          if (!contentHeader) { console.log('=============== Content ================='); contentHeader = true; }
          process.stdout.write(before);
        }
        buffer = buffer.slice(start + '<think>'.length);
        inThink = true;
        if (!thinkHeader) { console.log('=============== Thinking ================='); thinkHeader = true; }
      } else {
        if (!contentHeader && thinkHeader) { console.log('\n=============== Content ================='); contentHeader = true; }
        process.stdout.write(buffer);
        buffer = '';
      }
    }
  }
}
console.log();

console.log('\n### Tool calling');
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Get the current weather for a location',
    parameters: { type: 'object', properties: { location: { type: 'string', description: 'The city name' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['location'] },
  },
}];
const called = await client.chat.completions.create({ model, messages: [{ role: 'user', content: "What's the weather in Beijing?" }], tools });
const message = called.choices[0].message;
if (message.tool_calls?.length) {
  for (const tc of message.tool_calls) {
    console.log(`Tool Call: ${tc.function.name}`);
    console.log(`  Arguments: ${tc.function.arguments}`);
  }
} else {
  console.log(message.content);
}

console.log('\n### Tool result round trip');
const getWeather = (location, unit = 'celsius') => `The weather in ${location} is 22°${unit[0].toUpperCase()} and sunny.`;
const finalResponse = await client.chat.completions.create({
  model,
  messages: [
    { role: 'user', content: "What's the weather in Beijing?" },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_123', type: 'function', function: { name: 'get_weather', arguments: '{"location": "Beijing", "unit": "celsius"}' } }] },
    { role: 'tool', tool_call_id: 'call_123', content: getWeather('Beijing', 'celsius') },
  ],
});
console.log(finalResponse.choices[0].message.content);
