// The DeepSeek-V3.2 recipe page's Python examples (streaming with thinking, tool calling with thinking, tool result
// round trip), translated to the openai npm client. Against the DeepSeek-V3.2 demo model:
//   node bin/tsglang.js make-tiny --preset demo --arch deepseek-v32 --out /tmp/demo-dsv32
//   node bin/tsglang.js serve --model-path /tmp/demo-dsv32 --reasoning-parser deepseek-v3 --tool-call-parser deepseekv32 \
//     --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
//   node examples/seed_deepseek.mjs [base_url]
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.argv[2] ?? 'http://localhost:30000/v1', apiKey: 'EMPTY' });
const model = 'deepseek-ai/DeepSeek-V3.2-Exp';
const thinking = { chat_template_kwargs: { thinking: true } };

console.log('### Streaming with thinking');
const stream = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'Solve this problem step by step: What is 15% of 240?' }], temperature: 0.7, max_tokens: 2048, stream: true, ...thinking,
});
let hasThinking = false;
let hasAnswer = false;
let thinkingStarted = false;
for await (const chunk of stream) {
  const delta = chunk.choices?.[0]?.delta;
  if (!delta) continue;
  if (delta.reasoning_content) {
    if (!thinkingStarted) { console.log('=============== Thinking ================='); thinkingStarted = true; }
    hasThinking = true;
    process.stdout.write(delta.reasoning_content);
  }
  if (delta.content) {
    if (hasThinking && !hasAnswer) { console.log('\n=============== Content ================='); hasAnswer = true; }
    process.stdout.write(delta.content);
  }
}
console.log();

console.log('\n### Tool calling (streaming, thinking)');
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Get the current weather for a location',
    parameters: { type: 'object', properties: { location: { type: 'string', description: 'The city name' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' } }, required: ['location'] },
  },
}];
const toolStream = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: "What's the weather in Beijing?" }], tools, temperature: 0.7, stream: true, ...thinking,
});
thinkingStarted = false;
hasThinking = false;
const calls = new Map();
for await (const chunk of toolStream) {
  const delta = chunk.choices?.[0]?.delta;
  if (!delta) continue;
  if (delta.reasoning_content) {
    if (!thinkingStarted) { console.log('=============== Thinking ================='); thinkingStarted = true; }
    hasThinking = true;
    process.stdout.write(delta.reasoning_content);
  }
  if (delta.tool_calls) {
    if (hasThinking && thinkingStarted) { console.log('\n=============== Content =================\n'); thinkingStarted = false; }
    for (const tc of delta.tool_calls) {
      const acc = calls.get(tc.index) ?? { name: null, arguments: '' };
      if (tc.function?.name) acc.name = tc.function.name;
      if (tc.function?.arguments) acc.arguments += tc.function.arguments;
      calls.set(tc.index, acc);
    }
  }
  if (delta.content) process.stdout.write(delta.content);
}
for (const [, tc] of [...calls].sort((a, b) => a[0] - b[0])) {
  console.log(`Tool Call: ${tc.name}`);
  console.log(`  Arguments: ${tc.arguments}`);
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
  temperature: 0.7,
});
console.log(finalResponse.choices[0].message.content);
