// The get_weather tool of the seed pages' tool-calling examples (MiniMax-M2.7 and DeepSeek-V3.2 deployment pages),
// shared by the parser, chat and structured-output tests.

/** The seed's get_weather tool, as the pages send it in `tools`. */
export const SEED_WEATHER_TOOL = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Get the current weather for a location',
    parameters: {
      type: 'object',
      properties: {
        location: { type: 'string', description: 'The city name' },
        unit: { type: 'string', enum: ['celsius', 'fahrenheit'], description: 'Temperature unit' },
      },
      required: ['location'],
    },
  },
};
